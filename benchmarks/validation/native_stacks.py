"""Speedup stacks of real native programs (issue 27), one sweep each at 1 and 2 threads.

Programs: an OpenMP loop program (workloads/openmp/omp_serial.c, gcc -fopenmp, recorded with
--omp-passive twins), a C pool whose main thread works (workloads/c/pool_main_works.c), `xz -T`,
`zstd -T`, the same xz under `sh -c "… > /dev/null"`, and a Java program with a fixed thread pool
(workloads/java/PoolWork.java). For each N-thread stack it prints the components, how the run was
read (form, working threads, drivers and coordinators), the serial fraction of the N-thread run's
own serial windows, (N − 1)·T_serial/T_p, the program's own clock of its serial parts where it
reports one, and the classification tree's class and largest delimiters.

    .venv/bin/python benchmarks/native_stacks.py [--only openmp,xz] [--json out.json] [--keep DIR]  # root, perf
    .venv/bin/python benchmarks/native_stacks.py --from DIR      # the table again from a --keep directory
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))

from scalestack.analysis.classify import classify  # noqa: E402
from scalestack.analysis.serial import classify_threads  # noqa: E402
from scalestack.analysis.speedup import COMPONENTS  # noqa: E402
from scalestack.analysis.sweep import stacks  # noqa: E402
from scalestack.collect.sweep import load_sweep, run_sweep  # noqa: E402


def text_file(path: Path, size: int) -> None:
    """Seeded word salad: compressible, but not trivially."""
    rng = np.random.default_rng(1)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    words = ["".join(rng.choice(letters, rng.integers(2, 10))) for _ in range(5000)]
    out, n = [], 0
    while n < size:
        line = " ".join(words[i] for i in rng.integers(0, len(words), 12)) + "\n"
        out.append(line)
        n += len(line)
    path.write_text("".join(out))


def programs(work: Path) -> dict[str, dict]:
    subprocess.run(["gcc", "-O1", "-Wall", "-fopenmp", str(ROOT / "workloads/openmp/omp_serial.c"), "-o",
                    str(work / "omp_serial")], check=True)
    subprocess.run(["gcc", "-O1", "-Wall", "-pthread", str(ROOT / "workloads/c/pool_main_works.c"), "-o",
                    str(work / "pool")], check=True)
    text_file(work / "text", 4_000_000)
    progs = {
        "openmp": {"cmd": [str(work / "omp_serial"), "20", "300", "20"], "env": {"OMP_NUM_THREADS": "{threads}"},
                   "passive": True, "own": True},
        "pool": {"cmd": [str(work / "pool"), "{threads}", "20", "300", "20"], "own": True},
        "xz": {"cmd": ["xz", "-T{threads}", "-2", "--block-size=512KiB", "-c", "-k", str(work / "text")]},
        "xz-sh": {"cmd": ["sh", "-c", f"xz -T{{threads}} -2 --block-size=512KiB -c {work / 'text'} > /dev/null"]},
        "zstd": {"cmd": ["zstd", "-T{threads}", "-9", "-B512KiB", "-c", str(work / "text")]},
    }
    if shutil.which("javac"):
        subprocess.run(["javac", "-d", str(work / "jcls"), str(ROOT / "workloads/java/PoolWork.java")], check=True)
        progs["java"] = {"cmd": ["java", "-cp", str(work / "jcls"), "PoolWork", "{threads}", "1200", "60"]}
    return progs


def record(name: str, p: dict, work: Path, threads=(1, 2)) -> None:
    d = work / "sweeps" / name
    env = dict(p.get("env", {}))
    if p.get("own"):
        env["SERIAL_OUT"] = str(work / f"{name}.serial")
    with open(work / f"{name}.stdout", "wb") as sink:  # xz/zstd -c write to stdout: not into the terminal
        saved = os.dup(1)
        os.dup2(sink.fileno(), 1)
        try:
            run_sweep(p["cmd"], list(threads), str(d), env=env, omp_passive=p.get("passive", False))
        finally:
            os.dup2(saved, 1)
            os.close(saved)


def measure(name: str, work: Path) -> list[dict]:
    d = work / "sweeps" / name
    own = work / f"{name}.serial"
    traces, passive = load_sweep(str(d)), load_sweep(str(d), "passive")
    res = stacks(traces, passive)
    # the program's own clock: lines in run order (t1, [t1 passive], t2, [t2 passive])
    lines = own.read_text().split() if own.exists() else []
    clocks = [(float(lines[i + 1]), float(lines[i + 3])) for i in range(0, len(lines), 6)]
    step = 2 if passive else 1
    rows = []
    for k, st in enumerate(res):
        n = st.n
        tr = traces[n]
        kinds = classify_threads(tr)
        t_ser = classify_threads(passive[n]).sweep.serial_ns if passive else kinds.sweep.serial_ns
        cls, top = classify(st)
        row = {"program": name, "n": n, "speedup": st.speedup, **{c: getattr(st, c) for c in COMPONENTS},
               "form": st.form, "seq_thesis": st.seq_thesis, "seq_general": st.seq_general,
               "seq_st_measured": st.seq_st_measured, "spin": st.spin, "workers": st.workers,
               "others": ", ".join(f"{t['name']} ({t['kind']})" for t in st.threads),
               "serial_windows": (n - 1) * t_ser / tr.wall_ns, "class": cls, "top": top}
        if clocks and k * step < len(clocks):
            s_own, wall_own = clocks[k * step]
            row["serial_own"] = (n - 1) * s_own / wall_own
        rows.append(row)
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", help="comma-separated program names")
    ap.add_argument("--quick", action="store_true", help="the C pool whose main thread works only (a few seconds)")
    ap.add_argument("--json")
    ap.add_argument("--keep", help="keep the programs and sweeps in this directory (default: a temporary one)")
    ap.add_argument("--from", dest="from_dir", help="recompute the table from a --keep directory, recording nothing")
    args = ap.parse_args(argv)
    if args.quick and not args.only:
        args.only = "pool"
    rows = []
    with tempfile.TemporaryDirectory(prefix="native-stacks-") as tmp:
        if args.from_dir:
            work = Path(args.from_dir)
            names = sorted(p.name for p in (work / "sweeps").iterdir())
            order = ["openmp", "pool", "xz", "xz-sh", "zstd", "java"]
            names.sort(key=lambda x: order.index(x) if x in order else len(order))
        else:
            work = Path(args.keep or tmp)
            work.mkdir(parents=True, exist_ok=True)
            names = []
            for name, p in programs(work).items():
                if args.only and name not in args.only.split(","):
                    continue
                if shutil.which(p["cmd"][0]) is None and not Path(p["cmd"][0]).exists():
                    print(f"{name}: {p['cmd'][0]} is not installed, skipped")
                    continue
                record(name, p, work)
                names.append(name)
        for name in names:
            rows += measure(name, work)
    head = "| program | N | S | " + " | ".join(c.upper() for c in COMPONENTS) + \
        " | form | workers | not workers | serial windows | own clock | class, top delimiters |"
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for r in rows:
        if r["n"] == 1:
            continue
        own = f"{r['serial_own']:.2f}" if "serial_own" in r else "–"
        print(f"| {r['program']} | {r['n']} | {r['speedup']:.2f} | " + " | ".join(f"{r[c]:.2f}" for c in COMPONENTS)
              + f" | {r['form']} | {r['workers']} | {r['others'] or '–'} | {r['serial_windows']:.2f} | {own} | "
              f"{r['class']}: {', '.join(r['top'])} |")
    worst = min((min(r[c] for c in COMPONENTS) for r in rows if r["n"] > 1), default=0.0)
    print(f"lowest component: {worst:.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
