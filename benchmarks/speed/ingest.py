"""How fast recordings become Traces: events per second and memory, against perf's own tools.

Records a switch-heavy C program (workloads/c/prodcons.c: items handed over through condition
variables, ~5 events per item) sized for about 10^5, 10^6 (and, with --big, 10^7) events, then on
the same perf.data measures, in one run:

* `perf script` writing the text to /dev/null, and `perf sched timehist` likewise (perf's own
  fastest reader of the same file);
* scalestack's direct perf.data reader (`ingest/perf_data.py`: compiled record walk and decoder),
  alone and with the state builder (perf.data -> Trace), in a fresh process after a warm-up on a
  small file (so numba's cached machine code is loaded, as in any second run);
* the text path kept for text files: the compiled parser of perf script's output, with the state
  builder;
* peak memory of perf.data -> Trace (ru_maxrss of that process), and how far it rose above the
  process's size after the warm-up (Python, NumPy, numba's code), against the file's size.

    .venv/bin/python benchmarks/speed/ingest.py            # 10^5 and 10^6 events
    .venv/bin/python benchmarks/speed/ingest.py --big      # and 10^7 (about 1 GB of perf.data)
    .venv/bin/python benchmarks/speed/ingest.py --quick    # 10^5 only (the test runs this)
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
sys.path.insert(0, str(ROOT / "src"))

from scalestack.trace.events import RECORD_TRACEPOINTS  # noqa: E402

DIRECT = """
import resource, sys, time
sys.path.insert(0, {src!r})
from scalestack.ingest.perf_data import read_perf_data
from scalestack.trace.builder import build_trace
build_trace(read_perf_data({warm!r}), comm="prodcons")
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Python, NumPy, numba's code
t0 = time.perf_counter()
ev = read_perf_data({data!r})
t1 = time.perf_counter()
tr = build_trace(ev, comm="prodcons")
t2 = time.perf_counter()
print(len(ev), t1 - t0, t2 - t0, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, base)
"""

TEXT = """
import sys, time
sys.path.insert(0, {src!r})
from scalestack.ingest.perf_script import parse_perf_script
from scalestack.trace.builder import build_trace
build_trace(parse_perf_script({warm!r}), comm="prodcons")
t0 = time.perf_counter()
tr = build_trace(parse_perf_script({text!r}), comm="prodcons")
print(time.perf_counter() - t0)
"""


def record(tmp: Path, exe: Path, items: int) -> Path:
    data = tmp / f"perf-{items}.data"
    subprocess.run(["perf", "record", "-q", "-a", "-k", "CLOCK_MONOTONIC", "-m", "64M", "-o", str(data), "-e",
                    ",".join(RECORD_TRACEPOINTS), "--", str(exe), str(items), "2", "200"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return data


def timed(argv: list[str], stdout=subprocess.DEVNULL) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, stdout=stdout, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--big", action="store_true")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    sizes = [20_000] if args.quick else [150_000, 1_500_000] + ([15_000_000] if args.big else [])
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
        print(f"{'events':>10} {'file MB':>8} {'perf script':>12} {'timehist':>10} {'read':>10} {'-> Trace':>10} "
              f"{'read/script':>12} {'Trace/script':>13} {'text->Trace':>12} {'peak MB':>8} {'above base/file':>16}")
        for items in sizes:
            data = record(tmp, exe, items)
            text = tmp / f"text-{items}.txt"
            with open(text, "wb") as fh:
                t_script = timed(["perf", "script", "-i", str(data), "-F", "comm,pid,tid,cpu,time,event,trace", "--ns"],
                                 stdout=fh)
            t_timehist = timed(["perf", "sched", "timehist", "-i", str(data)])
            src = str(ROOT / "src")
            out = subprocess.run([sys.executable, "-c", DIRECT.format(src=src, warm=str(warm), data=str(data))],
                                 capture_output=True, text=True, check=True).stdout.split()
            n, t_read, t_trace, peak, base = int(out[0]), float(out[1]), float(out[2]), int(out[3]), int(out[4])
            t_text = float(subprocess.run([sys.executable, "-c", TEXT.format(src=src, warm=str(warm_text),
                                                                             text=str(text))],
                                          capture_output=True, text=True, check=True).stdout.split()[0])
            size = data.stat().st_size
            r = {"events": n, "perf_data_bytes": size, "perf_script_ev_s": n / t_script, "timehist_ev_s": n / t_timehist,
                 "read_ev_s": n / t_read, "to_trace_ev_s": n / t_trace, "read_vs_perf_script": t_script / t_read,
                 "trace_vs_perf_script": t_script / t_trace, "text_to_trace_ev_s": n / t_text, "peak_bytes": peak,
                 "baseline_bytes": base, "peak_above_baseline_vs_file": (peak - base) / size}
            results[str(n)] = r
            print(f"{n:>10,d} {size / 1e6:8.1f} {r['perf_script_ev_s'] / 1e6:9.2f} M/s {r['timehist_ev_s'] / 1e6:7.2f} M/s "
                  f"{r['read_ev_s'] / 1e6:7.2f} M/s {r['to_trace_ev_s'] / 1e6:7.2f} M/s {r['read_vs_perf_script']:11.1f}x "
                  f"{r['trace_vs_perf_script']:12.1f}x {r['text_to_trace_ev_s'] / 1e6:8.2f} M/s "
                  f"{peak / 1e6:8.0f} {r['peak_above_baseline_vs_file']:15.2f}x", flush=True)
            os.unlink(data)
            os.unlink(text)
    print("targets: perf.data -> Trace >= 10 M events/s and >= 20x perf script; memory <= 2x the file")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
