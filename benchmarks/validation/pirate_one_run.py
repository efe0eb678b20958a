"""One run with the pirate changing size (`pirate-curve --one-run`) against one run per size.

The paper's stand-alone Cache Pirating measures time(cache size) in a single run of the program, the
pirate's working set W changing over time (spec §2.3). Without counters, scalestack counts the work
of a window as the bytes the program reads and writes. This prints, for each program, both curves'
slowdowns at the same sizes and what each cost in seconds. The separate-runs curve is measured twice,
before and after the one run (A and B): how far A and B differ is what the machine's noise and drift
allow, the yardstick for how far the one-run curve is from their mean.

Sizes: 0, half and all of the cache the pirate holds here (its measured knee; the sysfs LLC of this
VM is 32 MiB and a program gets 4-12 MiB of it). Programs: the eklov_lookup streaming kernel with
a table in L1, of half the knee and of the knee, and the real compressors found on the machine
(xz -T1, zstd -T1) over a text file.

    .venv/bin/python benchmarks/validation/pirate_one_run.py            # every program, 3 runs per size
    .venv/bin/python benchmarks/validation/pirate_one_run.py --quick    # the lookup kernel at half the knee, shorter
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))

from scalestack.eklov import curve as cv  # noqa: E402
from scalestack.eklov.pirate import effective_llc_bytes, llc_info  # noqa: E402


def text_file(path: str, mib: int) -> None:
    """Compressible input: the Python standard library's sources (repeated only if they are fewer
    bytes than asked: repeats compress unusually fast)."""
    src = b"".join(p.read_bytes() for p in sorted(Path(os.__file__).parent.rglob("*.py")))
    with open(path, "wb") as fh:
        for _ in range((mib << 20) // len(src) + 1):
            fh.write(src)
        fh.truncate(mib << 20)


def programs(tmp: str, knee: int, quick: bool) -> list[tuple[str, list[str], list[str]]]:
    """(label, argv for one run per size, argv for the one long run): the long run does more passes
    of the same work, so it lasts through several rounds of windows."""
    exe = os.path.join(tmp, "eklov_lookup")
    subprocess.run(["gcc", "-O2", str(ROOT / "workloads" / "c" / "eklov_lookup.c"), "-o", exe], check=True)
    data = os.path.join(tmp, "random")
    with open(data, "wb") as fh:
        fh.write(os.urandom(16 << 20))
    half = max(1 << 20, knee // 2 >> 20 << 20)
    if quick:  # a third of the passes: the table's figures come from the full mode, the test checks the table's form
        return [(f"lookup {half >> 20} MiB table", [exe, str(half), "4", data], [exe, str(half), "40", data])]
    out = [(f"lookup {half >> 20} MiB table", [exe, str(half), "12", data], [exe, str(half), "120", data])]
    out.insert(0, ("lookup 16 KiB table", [exe, str(16 << 10), "12", data], [exe, str(16 << 10), "400", data]))
    out.append((f"lookup {knee >> 20} MiB table", [exe, str(knee), "6", data], [exe, str(knee), "60", data]))
    text = os.path.join(tmp, "text")
    text_file(text, 8)
    big = os.path.join(tmp, "text4")
    text_file(big, 32)
    if shutil.which("xz"):
        out.append(("xz -T1 -6", ["xz", "-T1", "-6", "-c", text], ["xz", "-T1", "-6", "-c", big]))
    if shutil.which("zstd"):
        out.append(("zstd -T1 -19", ["zstd", "-q", "-T1", "-19", "-c", text], ["zstd", "-q", "-T1", "-19", "-c", big]))
    return out


HOLD, SETTLE = 0.2, 0.05  # the one run's windows (`one_run_curve`)


def one_run(long: list[str], sizes: list[int]) -> cv.PirateCurve:
    """The one-run curve; a lookup run that ended before its last round of windows (its speed, the
    pirate's re-warming that it runs through and the windows the pirate's self-check discards vary
    with the host) is run again with twice the passes, as the error advises."""
    try:
        return cv.one_run_curve(long, sizes, hold=HOLD, settle=SETTLE)
    except cv.RunTooShort:
        if not os.path.basename(long[0]).startswith("eklov_lookup"):
            raise
        return cv.one_run_curve([*long[:2], str(2 * int(long[2])), *long[3:]], sizes, hold=HOLD, settle=SETTLE)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="the lookup kernel only, a third of the passes, 2 runs per size")
    ap.add_argument("--repeat", type=int, default=3, help="runs per size for the separate-runs curve")
    args = ap.parse_args()
    repeat = 2 if args.quick else args.repeat
    cpu = llc_info(0).cpus[-1]
    knee, _ = effective_llc_bytes(cpu)
    sizes = [0, max(1 << 20, knee // 2 >> 20 << 20), knee]
    print(f"cache the pirate holds here (knee of its latency curve): {knee / 2**20:.0f} MiB; "
          f"sizes W = {', '.join(f'{w / 2**20:.0f}' for w in sizes)} MiB")
    print(f"{'program':<26} {'W MiB':>6} {'runs A':>7} {'runs B':>7} {'one run':>8} {'B - A':>7} {'one - AB':>8}"
          "   cost: runs A / one run (s)")
    noise, diffs = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for label, short, long in programs(tmp, knee, args.quick):
            t0 = time.monotonic()
            a = cv.pirate_curve(short, sizes, repeat, counters=False)
            t1 = time.monotonic()
            one = one_run(long, sizes)
            t2 = time.monotonic()
            b = cv.pirate_curve(short, sizes, repeat, counters=False)  # after: the machine's drift shows in B - A
            for k, (ra, rb, o) in enumerate(zip(a.rows(), b.rows(), one.rows(), strict=True)):
                sa, sb, so = ra["slowdown"], rb["slowdown"], o["slowdown"]
                if k:
                    noise.append(abs(sb - sa))
                    diffs.append(abs(so - (sa + sb) / 2))
                cost = f"   {t1 - t0:5.1f} / {t2 - t1:5.1f}" if k == 0 else ""
                flagged = (ra["discarded"], rb["discarded"], o["discarded"])
                flag = f"  flagged {flagged[0]}/{flagged[1]}/{flagged[2]}" if any(flagged) else ""
                print(f"{label if k == 0 else '':<26} {ra['pirate_bytes'] / 2**20:6.0f} {sa:7.3f} {sb:7.3f} {so:8.3f} "
                      f"{sb - sa:+7.3f} {so - (sa + sb) / 2:+8.3f}{cost}{flag}")
            if one.notice:
                print(f"{'':<26} one run: {one.notice}")
    print(f"over the pirated sizes ({len(diffs)} points): mean |one run - mean of A, B| {sum(diffs) / len(diffs):.3f} "
          f"(max {max(diffs):.3f}); the separate runs' own repeatability, mean |B - A| {sum(noise) / len(noise):.3f} "
          f"(max {max(noise):.3f})")

if __name__ == "__main__":
    main()
