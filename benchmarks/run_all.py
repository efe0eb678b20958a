"""Every benchmark's --quick mode in turn (`make bench`): speed/ (how fast and how costly) and
validation/ (how accurate, against simulators and the kernel). Prints each script's output and a
final table of which ran, failed or were skipped (a script exits 0 when its tools are missing)."""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
LIBRARIES = {"paired_runs.py"}  # shared helpers, not benchmarks


def scripts(kind: str | None = None) -> list[Path]:
    kinds = [kind] if kind else ["speed", "validation"]
    return [p for k in kinds for p in sorted((HERE / k).glob("*.py")) if p.name not in LIBRARIES]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="each script's --quick mode (the default of make bench)")
    ap.add_argument("--only", choices=["speed", "validation"], help="one of the two folders")
    args = ap.parse_args(argv)
    results = []
    for path in scripts(args.only):
        print(f"\n=== {path.parent.name}/{path.name}", flush=True)
        t0 = time.monotonic()
        rc = subprocess.run([sys.executable, str(path), *(["--quick"] if args.quick else [])]).returncode
        results.append((f"{path.parent.name}/{path.name}", rc, time.monotonic() - t0))
    print("\nbenchmark                                   status   seconds")
    for name, rc, secs in results:
        print(f"{name:<43} {'ok' if rc == 0 else f'rc={rc}':<8} {secs:7.1f}")
    return 0 if all(rc == 0 for _, rc, _ in results) else 1


if __name__ == "__main__":
    sys.exit(main())
