"""How fast recordings become Traces: events per second and memory, against perf's own tools.

Records a switch-heavy C program (workloads/c/prodcons.c: items handed over through condition
variables, ~5 events per item) sized for about 10^5, 10^6 (and, with --big, 10^7) events, then on
the same perf.data measures, in one run:

* `perf script` writing its text to a file, and `perf sched timehist` to /dev/null (perf's own
  fastest reader of the same file): wall time and peak RSS of each;
* `scalestack import` of the same file to a saved Trace, as a user runs it (a fresh process:
  Python's start, numba's cached code, reading, the state builder, the save): wall time and
  peak RSS, and its ratios to the two perf tools;
* `scalestack report` of that saved Trace (time to the first figure): wall time and peak RSS;
* `scalestack crit --json` and `scalestack advise --json` of it (a big trace is read in time
  chunks): wall time and peak RSS;
* `scalestack import --between` of about a tenth of the recording from its middle (a part of a
  long recording, read in the memory the part needs): wall time and peak RSS;
* scalestack's direct perf.data reader (`ingest/perf_data.py`: compiled record walk and decoder),
  alone, with the state builder (perf.data -> Trace) and with the save, in a fresh process after
  a warm-up on a small file (so numba's cached machine code is loaded, as in any second run);
* the text path kept for text files: the compiled parser of perf script's output, with the state
  builder;
* peak memory of perf.data -> Trace (ru_maxrss of that process), and how far it rose above the
  process's size after the warm-up (Python, NumPy, numba's code), against the file's size;
* where perf.data -> saved Trace goes, pass by pass, in another such process (the reading, each
  pass the state builder runs on its main thread, the save), and the reconciliation with the
  runtime reports again on one worker (it cuts threads on every CPU the process may use).

    .venv/bin/python benchmarks/speed/ingest.py            # 10^5 and 10^6 events
    .venv/bin/python benchmarks/speed/ingest.py --big      # and 10^7 (about 1 GB of perf.data)
    .venv/bin/python benchmarks/speed/ingest.py --quick    # 10^5 only (the test runs this)
    .venv/bin/python benchmarks/speed/ingest.py --huge --huge-dir /big/disk   # and 10^8, synthetic

--huge adds a row at 10^8 events that no small machine can record: a synthetic perf.data
(benchmarks/speed/synth_perf_data.py, ~11 GB, checked against perf's own readers by
tests/ingest/test_synth_perf_data.py) of the same kind of futex handoffs, measured the same way
except that perf script's text goes to /dev/null (it would be ~15 GB) and the in-process
breakdown (read, -> Trace, text path) is left out. A step that fails (the import running out of
memory) is reported as failed, the other columns still measured.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# The tracepoint list comes from a child: this process stays small, because a child's peak RSS
# (wait4) counts the pages it shares with this process until it execs.
RECORD_TRACEPOINTS = subprocess.run(
    [sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[1]); from scalestack.trace.events import "
     "RECORD_TRACEPOINTS as R; print(','.join(R))", str(ROOT / "src")],
    capture_output=True, text=True, check=True).stdout.strip().split(",")

DIRECT = """
import resource, sys, time
sys.path.insert(0, {src!r})
from scalestack.cli import small_pages
small_pages()  # as the command does
from scalestack.ingest.perf_data import read_perf_data
from scalestack.trace.builder import build_trace
from scalestack.trace.store import save
build_trace(read_perf_data({warm!r}), comm="prodcons")
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Python, NumPy, numba's code
t0 = time.perf_counter()
ev = read_perf_data({data!r})
t1 = time.perf_counter()
tr = build_trace(ev, comm="prodcons")
t2 = time.perf_counter()
save(tr, {saved!r})
t3 = time.perf_counter()
print(len(ev), t1 - t0, t2 - t0, t3 - t0, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, base)
"""

PASSES = """
import functools, json, sys, time
sys.path.insert(0, {src!r})
from scalestack.cli import small_pages
small_pages()
from scalestack.ingest.perf_data import read_perf_data
from scalestack.trace import builder
from scalestack.trace.store import save
builder.build_trace(read_perf_data({warm!r}), comm="prodcons")
spent = {{}}
def timed(name, fn):
    def run(*a, **k):
        t = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            spent[name] = spent.get(name, 0.0) + time.perf_counter() - t
    return run
# the passes the builder runs on this thread (the names and switch spans run beside them on another)
for name, fn in (("walk", "_walk_parts"), ("thread order", "_walk_states"), ("reconcile", "_reconcile_rows"),
                 ("steals", "_reconcile_steals"), ("futex wakers", "attribute_futex_wakers"),
                 ("join", "_merge_adjacent"), ("finish", "finish_trace")):
    setattr(builder, fn, timed(name, getattr(builder, fn)))
ev = timed("read", read_perf_data)({data!r})
tr = builder.build_trace(ev, comm="prodcons")
timed("save", save)(tr, {saved!r})
del tr
reconcile = builder._reconcile_rows
builder._reconcile_rows = functools.partial(reconcile, workers=1)
spent["reconcile_all"] = spent.pop("reconcile")
builder.build_trace(ev, comm="prodcons")
spent["reconcile_one_worker"] = spent.pop("reconcile")
spent["reconcile"] = spent.pop("reconcile_all")
print(json.dumps(spent))
"""

TEXT = """
import sys, time
sys.path.insert(0, {src!r})
from scalestack.cli import small_pages
small_pages()
from scalestack.ingest.perf_script import parse_perf_script
from scalestack.trace.builder import build_trace
build_trace(parse_perf_script({warm!r}), comm="prodcons")
t0 = time.perf_counter()
tr = build_trace(parse_perf_script({text!r}), comm="prodcons")
print(time.perf_counter() - t0)
"""


PASS_NAMES = ("walk", "thread order", "reconcile", "steals", "futex wakers", "join", "finish")  # as PASSES times them


def record(tmp: Path, exe: Path, items: int) -> Path:
    data = tmp / f"perf-{items}.data"
    subprocess.run(["perf", "record", "-q", "-a", "-k", "CLOCK_MONOTONIC", "-m", "64M", "-o", str(data), "-e",
                    ",".join(RECORD_TRACEPOINTS), "--", str(exe), str(items), "2", "200"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return data


def timed(argv: list[str], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) -> tuple[float, int]:
    """Wall seconds and peak RSS in bytes of one run of `argv` (its own rusage, from wait4)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=stdout, stderr=stderr)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise subprocess.CalledProcessError(proc.returncode, argv)
    return wall, usage.ru_maxrss * 1024


def huge(where: Path, tmp: Path, events: int, cli: list[str]) -> dict:
    """The row of a synthetic perf.data: perf's two readers, import and report, each in its own process."""
    data = where / f"synth-{events}.data"
    saved = tmp / "synth.trace"
    try:
        # written by a child: this process stays small (a child's peak RSS counts its pages until exec)
        t0 = time.perf_counter()
        subprocess.run([sys.executable, str(Path(__file__).with_name("synth_perf_data.py")), "--events", str(events),
                        "-o", str(data), "--json", str(tmp / "synth.json")], check=True, stdout=subprocess.DEVNULL)
        t_write = time.perf_counter() - t0
        w = json.loads((tmp / "synth.json").read_text())
        n, size = w["events"], data.stat().st_size
        first, span = w["first_ns"], w["last_ns"] - w["first_ns"]
        r = {"events": n, "perf_data_bytes": size, "synthetic": True, "write_s": t_write}
        cols = {}
        for key, argv in (("timehist", ["perf", "sched", "timehist", "-i", str(data)]),
                          ("perf_script", ["perf", "script", "-i", str(data), "-F", "comm,pid,tid,cpu,time,event,trace",
                                           "--ns"]),
                          ("import", [*cli, "import", "perf-data", str(data), "--comm", w["comm"], "-o", str(saved)]),
                          ("report", [*cli, "report", str(saved), "-o", str(tmp / "report-synth")]),
                          ("crit", [*cli, "crit", str(saved), "--json"]),
                          ("advise", [*cli, "advise", str(saved), "--json"]),
                          ("part_import", [*cli, "import", "perf-data", str(data), "--comm", w["comm"], "--between",
                                           str(first + 45 * span // 100), str(first + 55 * span // 100),
                                           "-o", str(tmp / "part.trace")])):
            if key in ("report", "crit", "advise") and "import_s" not in r:
                cols[key] = "not run"
                continue
            err = tmp / f"{key}.stderr"
            try:
                with open(err, "wb") as fh:
                    r[f"{key}_s"], r[f"{key}_peak_bytes"] = timed(argv, stderr=fh)
                cols[key] = f"{r[f'{key}_s']:6.2f} / {r[f'{key}_peak_bytes'] / 1e6:5.0f}"
            except subprocess.CalledProcessError as exc:
                lines = err.read_text(errors="replace").strip().splitlines()
                r[f"{key}_failed"] = f"exit {exc.returncode}: {lines[-1] if lines else '(no message)'}"
                cols[key] = f"failed ({exc.returncode})"
        for key in ("timehist", "perf_script"):
            if f"{key}_s" in r and "import_s" in r:
                r[f"import_vs_{key}"] = r[f"{key}_s"] / r["import_s"]
        vs = [f"{r[k]:{width - 1}.2f}x" if k in r else f"{'-':>{width}}"
              for k, width in (("import_vs_timehist", 11), ("import_vs_perf_script", 9))]
        print(f"{n:>10,d} {size / 1e6:8.1f} | {cols['timehist']:>14} {cols['perf_script']:>14} {cols['import']:>14} | "
              f"{vs[0]} {vs[1]} | {'(synthetic: written in ' + format(t_write, '.0f') + ' s)':>39} | "
              f"{cols['report']:>14} {cols['part_import']:>14} {cols['crit']:>14} {cols['advise']:>14}", flush=True)
        for key in cols:
            if f"{key}_failed" in r:
                print(f"{'':>20}{key} failed, {r[f'{key}_failed']}", flush=True)
        return r
    finally:
        for f in (data, saved):
            if f.exists():
                os.unlink(f)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--big", action="store_true")
    ap.add_argument("--huge", action="store_true", help="add a row at 10^8 events from a synthetic perf.data")
    ap.add_argument("--huge-events", type=int, default=100_000_000)
    ap.add_argument("--huge-dir", help="where to write the synthetic file (default: the temporary directory)")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    sizes = [20_000] if args.quick else [150_000, 1_500_000] + ([15_000_000] if args.big else [])
    # the CLI children run this tree's scalestack, as the in-process measurements do, not
    # whichever one the interpreter has installed
    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), *filter(None, [os.environ.get("PYTHONPATH")])])
    results = {}
    with tempfile.TemporaryDirectory(prefix="scalestack-ingest-") as tmpd:
        tmp = Path(tmpd)
        exe = tmp / "prodcons"
        subprocess.run(["gcc", "-O1", "-pthread", str(ROOT / "workloads/c/prodcons.c"), "-o", str(exe)], check=True)
        warm = record(tmp, exe, 2_000)
        warm_text = tmp / "warm.txt"
        with open(warm_text, "wb") as fh:
            subprocess.run(["perf", "script", "-i", str(warm), "-F", "comm,pid,tid,cpu,time,event,trace", "--ns"],
                           stdout=fh, stderr=subprocess.DEVNULL, check=True)
        print(f"{'events':>10} {'file MB':>8} | {'timehist':>14} {'perf script':>14} {'import':>14} | "
              f"{'vs timehist':>11} {'vs script':>9} | {'read':>9} {'->Trace':>9} {'->saved':>9} {'text->T':>9} | "
              f"{'report':>14} {'part (1/10)':>14} {'crit':>14} {'advise':>14}")
        print(f"{'':>10} {'':>8} | {'s / peak MB':>14} {'s / peak MB':>14} {'s / peak MB':>14} | {'x faster':>11} "
              f"{'x faster':>9} | {'M ev/s':>9} {'M ev/s':>9} {'M ev/s':>9} {'M ev/s':>9} | {'s / peak MB':>14} "
              f"{'s / peak MB':>14} {'s / peak MB':>14} {'s / peak MB':>14}")
        cli = [sys.executable, "-m", "scalestack.cli"]
        timed([*cli, "import", "perf-data", str(warm), "--comm", "prodcons", "-o", str(tmp / "warm.trace")])
        for items in sizes:
            data = record(tmp, exe, items)
            text = tmp / f"text-{items}.txt"
            with open(text, "wb") as fh:
                t_script, m_script = timed(["perf", "script", "-i", str(data), "-F", "comm,pid,tid,cpu,time,event,trace",
                                            "--ns"], stdout=fh)
            t_timehist, m_timehist = timed(["perf", "sched", "timehist", "-i", str(data)])
            saved = tmp / f"run-{items}.trace"
            with open(tmp / "import.stderr", "wb") as fh:
                t_import, m_import = timed([*cli, "import", "perf-data", str(data), "--comm", "prodcons", "-o", str(saved)],
                                           stderr=fh)
            wall = float((tmp / "import.stderr").read_text().split(" s from ")[0].split(", ")[-1])
            t_part, m_part = timed([*cli, "import", "perf-data", str(data), "--comm", "prodcons", "--between",
                                    f"{0.45 * wall:.6f}s", f"{0.55 * wall:.6f}s", "-o", str(tmp / "part.trace")])
            t_report, m_report = timed([*cli, "report", str(saved), "-o", str(tmp / f"report-{items}")])
            t_crit, m_crit = timed([*cli, "crit", str(saved), "--json"])
            t_advise, m_advise = timed([*cli, "advise", str(saved), "--json"])
            src = str(ROOT / "src")
            out = subprocess.run([sys.executable, "-c", DIRECT.format(src=src, warm=str(warm), data=str(data),
                                                                      saved=str(tmp / "direct.trace"))],
                                 capture_output=True, text=True, check=True).stdout.split()
            n, t_read, t_trace, t_saved = int(out[0]), float(out[1]), float(out[2]), float(out[3])
            peak, base = int(out[4]), int(out[5])
            # the second build (its reconciliation on one worker) adds to the other passes' sums: halve those
            # (the reconciliation's two are apart)
            passes = json.loads(subprocess.run([sys.executable, "-c", PASSES.format(src=src, warm=str(warm), data=str(data),
                                                                                saved=str(tmp / "direct.trace"))],
                                               capture_output=True, text=True, check=True).stdout)
            passes = {k: v / 2 if k in PASS_NAMES and k != "reconcile" else v for k, v in passes.items()}
            t_text = float(subprocess.run([sys.executable, "-c", TEXT.format(src=src, warm=str(warm_text),
                                                                             text=str(text))],
                                          capture_output=True, text=True, check=True).stdout.split()[0])
            size = data.stat().st_size
            r = {"events": n, "perf_data_bytes": size, "perf_script_s": t_script, "perf_script_peak_bytes": m_script,
                 "timehist_s": t_timehist, "timehist_peak_bytes": m_timehist, "import_s": t_import,
                 "import_peak_bytes": m_import, "part_import_s": t_part, "part_import_peak_bytes": m_part,
                 "import_vs_timehist": t_timehist / t_import,
                 "import_vs_perf_script": t_script / t_import, "report_s": t_report, "report_peak_bytes": m_report,
                 "crit_s": t_crit, "crit_peak_bytes": m_crit, "advise_s": t_advise, "advise_peak_bytes": m_advise,
                 "perf_script_ev_s": n / t_script, "timehist_ev_s": n / t_timehist, "import_ev_s": n / t_import,
                 "read_ev_s": n / t_read, "to_trace_ev_s": n / t_trace, "to_saved_ev_s": n / t_saved,
                 "read_vs_perf_script": t_script / t_read, "trace_vs_perf_script": t_script / t_trace,
                 "text_to_trace_ev_s": n / t_text, "peak_bytes": peak, "baseline_bytes": base,
                 "peak_above_baseline_vs_file": (peak - base) / size, "passes_s": passes}
            results[str(n)] = r
            print(f"{n:>10,d} {size / 1e6:8.1f} | {t_timehist:6.2f} / {m_timehist / 1e6:5.0f} "
                  f"{t_script:6.2f} / {m_script / 1e6:5.0f} {t_import:6.2f} / {m_import / 1e6:5.0f} | "
                  f"{r['import_vs_timehist']:10.2f}x {r['import_vs_perf_script']:8.2f}x | "
                  f"{r['read_ev_s'] / 1e6:9.2f} {r['to_trace_ev_s'] / 1e6:9.2f} {r['to_saved_ev_s'] / 1e6:9.2f} "
                  f"{r['text_to_trace_ev_s'] / 1e6:9.2f} | {t_report:6.2f} / {m_report / 1e6:5.0f} "
                  f"{t_part:6.2f} / {m_part / 1e6:5.0f} {t_crit:6.2f} / {m_crit / 1e6:5.0f} "
                  f"{t_advise:6.2f} / {m_advise / 1e6:5.0f}", flush=True)
            print(f"{'':>10} where perf.data -> saved Trace goes (s, one process): "
                  + ", ".join(f"{k} {passes[k]:.2f}" for k in ("read", *PASS_NAMES, "save"))
                  + f" (reconcile on one worker {passes['reconcile_one_worker']:.2f}; the names and switch spans "
                  "are found on another thread meanwhile)", flush=True)
            for f in (data, text, saved):
                os.unlink(f)
        if args.huge:
            results["synthetic"] = huge(Path(args.huge_dir) if args.huge_dir else tmp, tmp, args.huge_events, cli)
    print("targets (issue 26): import >= 2x faster than perf sched timehist and >= 20x than perf script at 10^7 events; "
          "reading >= 10 M events/s; peak RSS <= 1x the file at 10^7 events")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
