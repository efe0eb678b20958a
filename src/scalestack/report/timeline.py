"""The interactive timeline of report.html: its data, packed small, and the page fragment.

One lane per thread, grouped by role and pool (the thread name without its trailing number:
``worker-1`` and ``worker-2`` are pool ``worker``), each lane the thread's state intervals; above
them the criticality strip: at each instant the thread that ran alone (the one the program waited
for, Du Bois et al.'s criticality undivided) or how many shared the CPUs.

The intervals travel as typed arrays (durations, state, CPU, wait object, waker), gzip-compressed
and base64-encoded inside the page, so 10^6 intervals take a few MB and nothing is fetched; the
page's script (`timeline.js`, inlined) unpacks them with the browser's DecompressionStream and
draws on a canvas, aggregating the intervals under each pixel column when zoomed out.
"""

from __future__ import annotations

import base64
import gzip
import html
import json
import re
from importlib import resources
from typing import Any

import numba
import numpy as np

from scalestack.trace import STATE_NAMES, Trace
from scalestack.units import format_ns

ROLE_ORDER = {"main": 0, "app": 1, "": 2, "runtime": 3, "jit": 4, "gc": 5}
MAX_MARKS = 20000


def pool_name(name: str) -> str:
    """A thread's pool: its name without a trailing number (``GC Thread#3`` -> ``GC Thread``)."""
    base = re.sub(r"[\s#_\-.:/]*\d+$", "", str(name))
    return base or str(name)


def lane_order(trace: Trace, group_by=None) -> tuple[np.ndarray, list[str]]:
    """Thread rows in lane order and each lane's group label: role and pool (``app · worker``; threads
    alone in their pool are grouped by role only), or `group_by`'s groups. Groups go main, app, other
    roles, runtime, JIT, GC, each by its first thread's start."""
    th = trace.threads
    n = len(th)
    if group_by is not None:
        from scalestack.analysis.bottle import group_labels

        gidx, labels, _ = group_labels(trace, group_by)
        group = [labels[g] for g in gidx]
    else:  # a pool of one joins its role's other lone threads
        pools = [(str(th.role[i]) or "thread", pool_name(th.name[i])) for i in range(n)]
        size: dict[tuple[str, str], int] = {}
        for p in pools:
            size[p] = size.get(p, 0) + 1
        group = [f"{r} · {p}" if size[(r, p)] > 1 else r for r, p in pools]
    first_start: dict[str, int] = {}
    for i in range(n):
        g = group[i]
        first_start[g] = min(first_start.get(g, int(th.start_ns[i])), int(th.start_ns[i]))
    roles = {group[i]: ROLE_ORDER.get(str(th.role[i]), 2) for i in range(n)}
    order = sorted(range(n), key=lambda i: (roles[group[i]], first_start[group[i]], group[i],
                                            int(th.start_ns[i]), int(th.tid[i])))
    return np.asarray(order, dtype=np.int64), [group[i] for i in order]


def _durations(d: np.ndarray) -> tuple[np.ndarray, str]:
    """Durations as uint32 ns when they fit (they compress well), else float64."""
    if len(d) == 0 or int(d.max()) < 2**32:
        return d.astype("<u4"), "u32"
    return d.astype("<f8"), "f64"


MAX_DETAIL = 4_000_000  # intervals and strip segments a page carries one by one (about 30 MB); beyond, summarised


@numba.njit(cache=True)
def _coarsen(starts, ends, keys, lo, width, out_s, out_e, out_k, n_out):
    """One lane's segments (sorted, not overlapping) summarised per bucket [lo + b * width, ...):
    each bucket shows the key that covered most of it; runs of buckets wholly inside one segment
    stay one segment, and equal neighbours merge. Appends to out_* from n_out; returns the new
    count. Up to 64 distinct keys per bucket are weighed (a lane has at most 8 states)."""
    acc_k = np.empty(64, np.int64)
    acc_d = np.zeros(64, np.int64)
    n_acc = 0
    cur = -1
    cov_s = 0
    cov_e = 0
    for i in range(starts.shape[0]):
        s = starts[i]
        e = ends[i]
        k = keys[i]
        while s < e:
            b = (s - lo) // width
            bs = lo + b * width
            be = bs + width
            if b != cur and n_acc > 0:  # a gap since the last bucket: close it
                n_out = _emit(out_s, out_e, out_k, n_out, cov_s, cov_e, acc_k, acc_d, n_acc)
                n_acc = 0
            cur = b
            if s == bs and e >= be and n_acc == 0:  # whole buckets in this one segment
                full = (e - bs) // width
                n_out = _put(out_s, out_e, out_k, n_out, bs, bs + full * width, k)
                s = bs + full * width
                continue
            stop = min(e, be)
            if n_acc == 0:
                cov_s = s
            cov_e = stop
            j = 0
            while j < n_acc and acc_k[j] != k:
                j += 1
            if j == n_acc and n_acc < 64:
                acc_k[j] = k
                acc_d[j] = 0
                n_acc += 1
            if j < n_acc:
                acc_d[j] += stop - s
            s = stop
            if s == be:
                n_out = _emit(out_s, out_e, out_k, n_out, cov_s, cov_e, acc_k, acc_d, n_acc)
                n_acc = 0
    if n_acc > 0:
        n_out = _emit(out_s, out_e, out_k, n_out, cov_s, cov_e, acc_k, acc_d, n_acc)
    return n_out


@numba.njit(cache=True, inline="always")
def _emit(out_s, out_e, out_k, n_out, s, e, acc_k, acc_d, n_acc):
    best = 0
    for j in range(1, n_acc):
        if acc_d[j] > acc_d[best]:
            best = j
    return _put(out_s, out_e, out_k, n_out, s, e, acc_k[best])


@numba.njit(cache=True, inline="always")
def _put(out_s, out_e, out_k, n_out, s, e, k):
    if n_out > 0 and out_k[n_out - 1] == k and out_e[n_out - 1] == s:
        out_e[n_out - 1] = e
        return n_out
    out_s[n_out] = s
    out_e[n_out] = e
    out_k[n_out] = k
    return n_out + 1


def coarsen(lane_off: np.ndarray, starts: np.ndarray, ends: np.ndarray, keys: np.ndarray, lo: int, width: int
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every lane (rows lane_off[k]:lane_off[k + 1]) summarised by `_coarsen` with buckets of
    `width` ns from `lo`: (lane_off, starts, ends, keys) of the summary."""
    n_buckets = int((int(ends.max(initial=lo)) - lo) // width) + 2
    cap = min(len(starts), (len(lane_off) - 1) * n_buckets) + len(lane_off) + 2
    out_s, out_e, out_k = np.empty(cap, np.int64), np.empty(cap, np.int64), np.empty(cap, np.int64)
    off = np.zeros(len(lane_off), np.int64)
    n = 0
    for k in range(len(lane_off) - 1):
        a, b = int(lane_off[k]), int(lane_off[k + 1])
        n = _coarsen(starts[a:b], ends[a:b], keys[a:b].astype(np.int64), lo, width, out_s, out_e, out_k, n)
        off[k + 1] = n
    return off, out_s[:n], out_e[:n], out_k[:n]


def detail_width(span_ns: int, intervals: int, lanes: int, limit: int = MAX_DETAIL) -> int:
    """0 when the page can carry every interval, else the bucket width (a 1-2-5 step of ns) that
    keeps the summary within `limit` intervals."""
    if intervals <= limit or span_ns <= 0:
        return 0
    raw = span_ns * max(lanes, 1) / limit
    mag = 10 ** int(np.floor(np.log10(max(raw, 1))))
    return int(next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw))


def critical_segments(trace: Trace, lane_of_row: np.ndarray, active: str = "running") -> tuple[np.ndarray, ...]:
    """The criticality strip: maximal segments of the run with the same running set's size r and,
    when r == 1, the same lone thread. Returns (start_ns, end_ns, r, lane) arrays, times absolute,
    lane -1 unless exactly one thread ran. Uses the same active intervals as `criticality` (the
    switch-instant spans of recordings, else RUNNING)."""
    from scalestack.analysis.criticality import critical_sweep

    t0, t1 = trace.start_ns, trace.end_ns
    rows, a, b, _, _ = critical_sweep(trace, active, t0, t1)
    lanes = lane_of_row[rows].astype(np.int64)
    times = np.concatenate([a, b, [t0, t1]]).astype(np.int64)
    delta = np.concatenate([np.ones(len(a), np.int64), -np.ones(len(b), np.int64), [0, 0]])
    order = np.argsort(times, kind="stable")
    u = times[order]
    r = np.cumsum(delta[order])
    s = np.cumsum(np.concatenate([lanes, -lanes, [0, 0]])[order])  # sum of running lanes: the lane when r == 1
    lone = np.where(r == 1, s, -1)
    start, end, rr, ll = u[:-1], u[1:], r[:-1], lone[:-1]
    keep = end > start
    start, end, rr, ll = start[keep], end[keep], rr[keep], ll[keep]
    if len(start) == 0:
        return start, end, rr, ll
    change = np.r_[True, (rr[1:] != rr[:-1]) | (ll[1:] != ll[:-1]) | (start[1:] != end[:-1])]
    idx = np.flatnonzero(change)
    ends = np.r_[end[idx[1:] - 1], end[-1]]
    return start[idx], ends, rr[idx], ll[idx]


def _nice_window(span_ns: int, n: int = 8) -> int:
    """A round window length (1, 2 or 5 times a power of ten ns) nearest span / n."""
    raw = max(span_ns / n, 1)
    mag = 10 ** int(np.floor(np.log10(raw)))
    return int(min((m * mag for m in (1, 2, 5, 10)), key=lambda w: abs(np.log(w / raw))))


def timeline_data(trace: Trace, options: Any = None, marks: list[dict] | None = None) -> dict[str, Any]:
    """Everything the page's timeline draws: lanes, packed intervals, criticality strip, marks.

    Times in the page are ns relative to the trace's start. Returns a dict with ``payload`` (the
    JSON the page embeds) and ``summary`` (a small description kept in report.json).
    """
    from scalestack.report.figures import STATE_COLOURS, colours_for

    group_by = getattr(options, "group_by", None)
    active = getattr(options, "active", "running")
    th, st = trace.threads, trace.states
    t0 = trace.start_ns
    order, groups = lane_order(trace, group_by)
    n_lanes = len(order)
    lane_of_row = np.empty(len(th), dtype=np.int64)
    lane_of_row[order] = np.arange(n_lanes)
    labels = [f"{th.name[i]} ({th.tid[i]})" for i in range(len(th))]
    colour = colours_for(labels, [str(r) for r in th.role])

    # intervals sorted by lane, then time (states are sorted by tid, then time)
    lane = lane_of_row[trace.thread_index(st.tid)] if len(st) else np.zeros(0, np.int64)
    idx = np.lexsort((st.start_ns, lane))
    lane = lane[idx]
    counts = np.bincount(lane, minlength=n_lanes)
    lane_off = np.r_[0, np.cumsum(counts)].astype(np.int64)
    starts, ends, state = st.start_ns[idx], st.end_ns[idx], st.state[idx]
    cpu, addr, waker = st.cpu[idx], st.addr[idx], st.waker[idx].astype("<i4")
    cs, ce, cr, cl = critical_segments(trace, lane_of_row, active)
    width = detail_width(trace.wall_ns, len(st) + len(cs), n_lanes, MAX_DETAIL)
    if width:  # too many to carry one by one: each lane's dominant state per `width` ns
        lane_off, starts, ends, state = coarsen(lane_off, starts, ends, state, t0, width)
        counts = np.diff(lane_off)
        cpu, addr, waker = np.full(len(starts), -1), np.zeros(len(starts), np.uint64), np.full(len(starts), -1, "<i4")
        key = (cl.astype(np.int64) + 1) * 256 + np.minimum(cr, 255)  # the strip: lone lane and count together
        _, cs, ce, key = coarsen(np.array([0, len(cs)]), cs, ce, key, t0, width)
        cl, cr = key // 256 - 1, key % 256
    lane_off = lane_off.astype("<u4")
    first = lane_off[:-1][counts > 0]
    lane_start = np.zeros(n_lanes)
    lane_start[counts > 0] = starts[first] - t0
    # intervals tile each lifetime, so a lane is its start plus durations; a gap (none in a
    # validated trace) is kept exact by folding it into the previous duration's successor's start
    dur, dur_kind = _durations(ends - starts)
    gaps = np.zeros(len(starts), dtype=bool)
    if len(starts) > 1:
        prev_end = np.r_[0, ends[:-1]]
        gaps = (starts != prev_end)
        gaps[first] = False
    addrs, obj = np.unique(addr, return_inverse=True)
    if len(addrs) and addrs[0] == 0:
        names_addr = [f"0x{int(a):x}" for a in addrs]
        names_addr[0] = ""
    else:
        names_addr = [""] + [f"0x{int(a):x}" for a in addrs]
        obj = obj + 1
    cdur, cdur_kind = _durations(ce - cs)
    crit_start = float(cs[0] - t0) if len(cs) else 0.0
    # intervals that do not follow the previous one of their lane (not in a valid trace): their starts
    gap_rows = np.flatnonzero(gaps)

    arrays: list[tuple[str, np.ndarray]] = [
        ("lane_off", lane_off), ("lane_start", lane_start.astype("<f8")), ("dur", dur),
        ("state", state.astype("u1")), ("cpu", cpu.astype("<i2")),
        ("obj", obj.astype("<u4")), ("waker", waker),
        ("gap_row", gap_rows.astype("<u4")), ("gap_start", (starts[gap_rows] - t0).astype("<f8")),
        ("crit_dur", cdur), ("crit_r", np.minimum(cr, 255).astype("u1")), ("crit_lane", cl.astype("<i4")),
    ]
    blob, layout = bytearray(), {}
    for name, arr in arrays:
        blob.extend(b"\0" * (-len(blob) % 8))
        raw = np.ascontiguousarray(arr).tobytes()
        layout[name] = [len(blob), len(arr), arr.dtype.str.lstrip("<|=")]
        blob.extend(raw)
    packed = base64.b64encode(gzip.compress(bytes(blob), compresslevel=6, mtime=0)).decode("ascii")

    lanes = [{"tid": int(th.tid[i]), "name": str(th.name[i]), "role": str(th.role[i]), "group": groups[k],
              "colour": colour[labels[i]], "intervals": int(counts[k])} for k, i in enumerate(order)]
    tid_lane = {int(th.tid[i]): k for k, i in enumerate(order)}
    page_marks = []
    for m in (marks or [])[:MAX_MARKS]:
        pm = {"kind": m["kind"], "label": m["label"], "t0": int(m["t0_ns"]) - t0, "t1": int(m["t1_ns"]) - t0}
        if m.get("tid") is not None:
            pm["lane"] = tid_lane.get(int(m["tid"]), -1)
        page_marks.append(pm)
    if not any(m["kind"] == "window" for m in page_marks) and trace.wall_ns > 0:
        w = _nice_window(trace.wall_ns)
        page_marks += [{"kind": "window", "label": f"window {k + 1}", "t0": a, "t1": min(a + w, trace.wall_ns)}
                       for k, a in enumerate(range(0, trace.wall_ns, w))]
    payload = {
        "span": trace.wall_ns, "lanes": lanes,
        "states": [{"name": n, "colour": STATE_COLOURS[n]} for n in STATE_NAMES],
        "addrs": names_addr, "marks": page_marks, "durKind": dur_kind, "critDurKind": cdur_kind,
        "critStart": crit_start, "intervals": int(len(starts)), "critSegments": int(len(cs)), "summaryNs": width,
        "traceIntervals": int(len(st)),
        "layout": layout, "blob": packed,
    }
    summary = {"lanes": [{k: v for k, v in ln.items() if k != "colour"} for ln in lanes],
               "intervals": int(len(starts)), "critical_segments": int(len(cs)), "marks": len(page_marks),
               "trace_intervals": int(len(st)), "summary_ns": width,
               "packed_bytes": len(packed)}
    return {"payload": payload, "summary": summary}


def unpack(payload: dict[str, Any]) -> dict[str, np.ndarray]:
    """The page's arrays from a payload, as timeline.js decodes them, plus each interval's
    ``start``/``end`` and each criticality segment's ``crit_start``/``crit_end`` (ns from the
    trace's start), rebuilt from the durations as the page does."""
    raw = gzip.decompress(base64.b64decode(payload["blob"]))
    out = {k: np.frombuffer(raw, dtype="<" + kind if kind != "u1" else "u1", count=n, offset=off)
           for k, (off, n, kind) in payload["layout"].items()}
    off = out["lane_off"]
    start = np.empty(len(out["dur"]))
    gap = dict(zip(out["gap_row"].tolist(), out["gap_start"].tolist(), strict=True))
    for lane in range(len(off) - 1):
        t = out["lane_start"][lane]
        for i in range(off[lane], off[lane + 1]):
            t = gap.get(i, t)
            start[i] = t
            t += float(out["dur"][i])
    out["start"], out["end"] = start, start + out["dur"]
    cdur = out["crit_dur"].astype(np.float64)
    out["crit_start"] = payload["critStart"] + np.r_[0.0, np.cumsum(cdur)[:-1]]
    out["crit_end"] = out["crit_start"] + cdur
    return out


def timeline_html(data: dict[str, Any]) -> str:
    """The timeline's section of report.html: toolbar, canvas, the packed data and the script."""
    p = data["payload"]
    js = resources.files("scalestack.report").joinpath("timeline.js").read_text(encoding="utf-8")
    payload = json.dumps(p, separators=(",", ":"), allow_nan=False).replace("</", "<\\/")
    legend = "".join(f"<span class='sst-key'><i style='background:{s['colour']}'></i>{html.escape(s['name'].replace('_', ' '))}</span>"
                     for s in p["states"])
    kinds = sorted({m["kind"] for m in p["marks"]})
    return (
        "<section id='timeline'><h2>Timeline</h2>"
        "<p class='help'>One lane per thread, grouped by role and pool; colour = the thread's state. The strip on "
        "top shows, at each instant, the thread that ran alone (the one the program waited for, in its colour) "
        "or, grey, how many shared the CPUs (the lower, the more). Wheel: zoom at the pointer; drag: pan; "
        "shift+wheel: scroll the lanes; double-click: the whole run; hover: the interval; click a wait: jump to "
        "the thread that ended it.</p>"
        + (f"<p class='help'>This run has {p['traceIntervals']:,} intervals, too many to carry one by one: each lane "
           f"shows the state that covered most of every {format_ns(p['summaryNs'])} (waits are not linked to their "
           "wakers here). <code>scalestack report TRACE --between T0 T1</code> shows every interval of a part.</p>"
           if p.get("summaryNs") else "")
        +
        f"<div class='sst-tl' id='sst-tl' data-lanes='{len(p['lanes'])}' data-intervals='{p['intervals']}' "
        f"data-mark-kinds='{html.escape(' '.join(kinds))}'>"
        "<div class='sst-bar'><label>show <select class='sst-sel'><option value=''>whole run</option></select></label>"
        "<button type='button' class='sst-reset'>whole run</button>"
        f"<span class='sst-range'></span><span class='sst-legend'>{legend}</span></div>"
        "<div class='sst-scroll'><canvas class='sst-canvas'></canvas><div class='sst-spacer'></div></div>"
        "<div class='sst-tip' hidden></div>"
        "<noscript>The timeline needs JavaScript.</noscript></div>"
        f"<script type='application/json' id='sst-tl-data'>{payload}</script>"
        f"<script>{js}</script></section>"
    )


TIMELINE_STYLE = """
.sst-tl{position:relative;border:1px solid #ddd;margin:.6em 0;user-select:none}
.sst-bar{display:flex;flex-wrap:wrap;gap:.4em 1em;align-items:center;padding:.3em .5em;background:#f6f6f6;font-size:12px}
.sst-range{color:#555;font-variant-numeric:tabular-nums} .sst-legend{margin-left:auto}
.sst-key{margin-left:.8em;white-space:nowrap} .sst-key i{display:inline-block;width:.9em;height:.9em;margin-right:.3em;vertical-align:-1px;border:1px solid #bbb}
.sst-scroll{position:relative;overflow-y:auto;overflow-x:hidden}
.sst-canvas{position:sticky;top:0;display:block;width:100%;cursor:grab}
.sst-tip{position:absolute;pointer-events:none;background:#fffffff0;border:1px solid #aaa;padding:.3em .5em;font-size:12px;box-shadow:0 1px 4px #0003;white-space:nowrap;z-index:2}
p.help{color:#555;font-size:13px}
"""
