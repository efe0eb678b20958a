"""Regenerate docs/gallery.md: real programs nobody here wrote, recorded, reported, screenshotted.

For each program: record it (root, perf or eBPF), write its report, open report.html in headless
Chromium and take a screenshot of the first screen (the advice and the timeline), then put the
advice in docs/gallery.md. Also docs/img/report-*.png for docs/report.md.

    sudo .venv/bin/python scripts/gallery.py             # every program (a few minutes)
    sudo .venv/bin/python scripts/gallery.py xz javac    # some of them

Needs root, perf, gcc (OpenMP: libgomp), javac, xz, zstd, sort, chromium and the playwright package.
"""

from __future__ import annotations

import argparse
import datetime
import io
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

import scalestack  # noqa: E402
from scalestack.report import ReportOptions, build_report, write_report  # noqa: E402
from scalestack.report.browser import browser_page, open_report, why_not  # noqa: E402
from scalestack.report.text import short_command  # noqa: E402
from scalestack.units import format_ns  # noqa: E402

IMG = ROOT / "docs" / "img" / "gallery"
MAX_PNG = 300_000

PYTHON_THREADS = r'''
import hashlib, threading
def count(n):  # pure Python: holds the GIL
    s = 0
    for i in range(n):
        s += i * i
    return s
def digest(n):  # hashlib releases the GIL on large buffers
    b = bytes(1 << 20)
    for _ in range(n):
        hashlib.sha256(b).digest()
ts = [threading.Thread(target=count, args=(5_000_000,), name=f"count-{k}") for k in range(3)]
ts += [threading.Thread(target=digest, args=(250,), name="digest")]
for t in ts: t.start()
for t in ts: t.join()
'''

OPENMP = r'''
#include <math.h>
#include <stdio.h>
#include <omp.h>
/* rows get more expensive down the matrix: schedule(static) gives the last thread the most work */
int main(void) {
    double total = 0;
    for (int rep = 0; rep < 6; rep++) {
        #pragma omp parallel for schedule(static) reduction(+:total)
        for (int i = 0; i < 2000; i++)
            for (int j = 0; j < i * 40; j++) total += sqrt((double)j + i);
    }
    printf("%g\n", total);
    return 0;
}
'''


def text_file(path: Path, mb: int) -> None:
    """Pseudo-random lines of words (deterministic), `mb` megabytes."""
    import numpy as np

    rng = np.random.default_rng(7)
    words = np.array(["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet",
                      "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango"])
    with open(path, "w") as f:
        size = 0
        while size < mb * 1_000_000:
            idx = rng.integers(0, len(words), size=(20000, 6))
            nums = rng.integers(0, 1_000_000, size=20000)
            block = "\n".join(f"{' '.join(words[r])} {n}" for r, n in zip(idx, nums, strict=True)) + "\n"
            f.write(block)
            size += len(block)


def java_sources(d: Path, n: int = 12) -> list[str]:
    out = []
    for k in range(n):
        p = d / f"Gallery{k}.java"
        methods = "\n".join(f"    static int m{j}(int x) {{ return java.util.stream.IntStream.range(0, x)"
                            f".map(i -> i * {j}).filter(i -> i % 3 == 0).sum(); }}" for j in range(40))
        p.write_text(f"import java.util.*;\npublic class Gallery{k} {{\n{methods}\n"
                     f"    public static void main(String[] a) {{ System.out.println(m1(10)); }}\n}}\n")
        out.append(str(p))
    return out


def programs(work: Path) -> dict[str, dict]:
    """name -> {cmd, title, note}; inputs are made in `work`."""
    data = work / "words.txt"
    if not data.exists():
        text_file(data, 12)
    (work / "threads.py").write_text(PYTHON_THREADS)
    (work / "omp.c").write_text(OPENMP)
    out = {
        "sort": {"cmd": ["sort", "--parallel=2", "-S", "200M", "-o", str(work / "sorted.txt"), str(data)],
                 "title": "GNU sort --parallel=2", "note": "12 MB of text lines, two sort threads"},
        "xz": {"cmd": ["xz", "-T2", "-4", "--block-size=2MiB", "-k", "-f", str(data)], "title": "xz -T2",
               "note": "compressing the same 12 MB in blocks of 2 MiB with two worker threads"},
        "zstd": {"cmd": ["zstd", "-q", "-T2", "-15", "-B2MiB", "-f", str(data), "-o", str(work / "words.zst")],
                 "title": "zstd -T2", "note": "compressing the same 12 MB at level 15 in 2 MiB jobs, two worker threads"},
        "javac": {"cmd": ["javac", "-d", str(work / "classes"), *java_sources(work)], "title": "javac, 12 files",
                  "note": "the JDK's compiler on 12 generated files of lambdas: a JVM's GC, JIT and main threads"},
        "python": {"cmd": [sys.executable, str(work / "threads.py")], "title": "CPython threads",
                   "note": "three pure-Python threads and one hashing thread: the GIL lets one run at a time"},
        "openmp": {"cmd": [str(work / "omp")], "title": "OpenMP parallel for (libgomp)",
                   "note": "a triangular loop under schedule(static): the last thread gets the most work"},
    }
    if shutil.which("gcc"):
        subprocess.run(["gcc", "-O1", "-fopenmp", str(work / "omp.c"), "-o", str(work / "omp"), "-lm"], check=True)
    return out


def small_png(png: bytes) -> bytes:
    """A palette PNG (256 colours): screenshots of text and flat colours stay well under 300 KB."""
    from PIL import Image

    img = Image.open(io.BytesIO(png)).convert("RGB")
    for colours in (256, 128, 64):
        buf = io.BytesIO()
        img.quantize(colours, method=Image.Quantize.MEDIANCUT).save(buf, format="PNG", optimize=True)
        if buf.tell() < MAX_PNG:
            break
    return buf.getvalue()


def screenshot(page, path: Path, top: str, bottom: str) -> None:
    """The page from element `top`'s top to element `bottom`'s bottom."""
    a = page.locator(top).bounding_box()
    b = page.locator(bottom).bounding_box()
    page.evaluate("() => window.scrollTo(0, 0)")
    a = page.locator(top).bounding_box()
    b = page.locator(bottom).bounding_box()
    clip = {"x": 0, "y": a["y"] - 8, "width": page.viewport_size["width"], "height": b["y"] + b["height"] - a["y"] + 16}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(small_png(page.screenshot(clip=clip, full_page=True)))


def run_one(name: str, spec: dict, work: Path) -> dict:
    trace_path = work / f"{name}.trace"
    print(f"gallery: recording {name}: {' '.join(spec['cmd'][:4])} ...", flush=True)
    trace = scalestack.record(spec["cmd"], str(trace_path))
    report = build_report(trace, ReportOptions())
    written = write_report(report, str(work / f"{name}-report"))
    with browser_page(1200, 900) as (page, errors):
        info = open_report(page, written["report.html"])
        if info["error"] or errors:
            raise RuntimeError(f"{name}: the report failed in Chromium: {info['error']} {errors}")
        screenshot(page, IMG / f"{name}.png", "h1", "#sst-tl")
        if name == "xz":  # docs/report.md: the page's top, and a zoomed timeline with a tooltip
            shot_report_docs(page, trace, report)
    advice = next((s for s in report.sections if s.key == "advice"), None)
    return {"name": name, "spec": spec, "trace": trace, "advice": advice.table if advice else [],
            "report": report}


def shot_report_docs(page, trace, report) -> None:
    import numpy as np

    from scalestack.trace import State

    page.evaluate("() => window.scrollTo(0, 0)")
    page.set_viewport_size({"width": 1200, "height": 900})
    (ROOT / "docs" / "img").mkdir(exist_ok=True)
    (ROOT / "docs" / "img" / "report-top.png").write_bytes(small_png(page.screenshot()))
    # zoom onto the longest futex wait that another traced thread ended, and hover it
    s = trace.states
    waits = np.flatnonzero((s.state == State.SYNC_WAIT) & np.isin(s.waker, trace.threads.tid) & (s.waker != s.tid))
    if not len(waits):
        return
    d = s.end_ns[waits] - s.start_ns[waits]
    i = int(waits[np.argsort(d)[int(len(d) * 0.9)]])  # a long wait, not the one that spans the run
    a, b = int(s.start_ns[i]) - trace.start_ns, int(s.end_ns[i]) - trace.start_ns
    lanes = [ln["tid"] for ln in report.timeline["summary"]["lanes"]]
    lane = lanes.index(int(s.tid[i]))
    page.evaluate("([a, b]) => window.scalestackTimeline.setRange(a - (b - a) * 0.5, b + (b - a) * 0.5)", [a, b])
    page.locator("#sst-tl").scroll_into_view_if_needed()
    box = page.locator(".sst-canvas").bounding_box()
    y = box["y"] + page.evaluate("(l) => window.scalestackTimeline.laneTop(l)", lane) + 7
    x = box["x"] + 190 + (box["width"] - 190) * 0.5
    page.mouse.click(x, y)  # the arrow from the waker
    page.mouse.move(x + 2, y + 1)
    tl = page.locator("#timeline").bounding_box()
    clip = {"x": 0, "y": tl["y"], "width": 1200, "height": min(tl["height"] + 90, 760)}
    (ROOT / "docs" / "img" / "report-timeline.png").write_bytes(small_png(page.screenshot(clip=clip)))


def markdown(results: list[dict]) -> str:
    machine = f"{os.cpu_count()}-core VM, Linux {platform.release()}"
    lines = [
        "# Gallery: reports of programs nobody here wrote",
        "",
        "Each program was recorded with `scalestack record` and reported with `scalestack report`; the picture is",
        "the top of its report.html (the advice, then the timeline: one lane per thread, the criticality strip",
        "above). See [report.md](report.md) for how to read them.",
        "",
        f"Made on {datetime.date.today().isoformat()} on a {machine} by `sudo .venv/bin/python scripts/gallery.py`",
        "(it makes the inputs, records, reports and takes the screenshots). Timings and advice differ from run",
        "to run: where the machine's CPUs are shared with other work, the runnable (orange) time is mostly other",
        "programs holding them, and the advice says so (\"threads wait ... for a CPU\").",
        "",
    ]
    for r in results:
        spec, tr = r["spec"], r["trace"]
        lines += [f"## {spec['title']}", "",
                  f"{spec['note'][0].upper() + spec['note'][1:]}. "
                  f"`{short_command([os.path.basename(a) if '/' in a else a for a in spec['cmd']], 90)}`: "
                  f"{len(tr.threads)} threads, {format_ns(tr.wall_ns)}.", "",
                  f"![report of {spec['title']}](img/gallery/{r['name']}.png)", ""]
        if r["advice"]:
            lines += ["| # | finding | evidence and advice | gain |", "|---|---|---|---|"]
            for row in r["advice"]:
                cells = [str(row.get(k, "")).replace("|", "\\|") for k in ("rank", "finding", "advice", "gain")]
                lines.append("| " + " | ".join(cells) + " |")
            lines.append("")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", help="programs to run (default: all)")
    ap.add_argument("--work", help="directory for inputs, traces and reports (default: a temporary one)")
    args = ap.parse_args()
    reason = why_not()
    if reason or os.geteuid() != 0:
        print(f"gallery: cannot run: {reason or 'recording needs root'}", file=sys.stderr)
        return 2
    work = Path(args.work or tempfile.mkdtemp(prefix="scalestack-gallery-"))
    work.mkdir(parents=True, exist_ok=True)
    specs = programs(work)
    names = args.names or list(specs)
    results = []
    for name in names:
        spec = specs[name]
        if shutil.which(spec["cmd"][0]) is None and not os.path.exists(spec["cmd"][0]):
            print(f"gallery: {name}: {spec['cmd'][0]} is not installed, left out", file=sys.stderr)
            continue
        results.append(run_one(name, spec, work))
    if not args.names:
        (ROOT / "docs" / "gallery.md").write_text(markdown(results))
        print("gallery: wrote docs/gallery.md")
    for r in results:
        print(f"gallery: {r['name']}: {len(r['trace'].threads)} threads, {format_ns(r['trace'].wall_ns)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
