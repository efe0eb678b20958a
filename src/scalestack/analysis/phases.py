"""Phases of parallel programs (Perelman et al.; spec: shared/spec/parallel-phases.md).

Each thread's samples are cut into its own intervals (a fixed number of samples, or a fixed
time, and never across a stall); each interval becomes a vector of how often each code region
was sampled; all intervals of all threads (and of all runs of a thread-count sweep) are
clustered *together*, so a phase means the same code in every thread and every run.

Pipeline (spec §1.2-1.7): per-thread intervals -> per-interval region histograms, normalised
to distributions -> random projection to `dims` dimensions (each region's projection row
comes from an RNG seeded by a stable hash of the region, so separately processed runs project
identically) -> k-means (Lloyd, 5 restarts, 100 iterations) for k = 1..k_max ->
SimPoint's BIC, smallest k reaching 90% of the BIC range -> representative interval (nearest
the centroid) and weight per phase. Then, from the Trace, each interval's running time and
criticality (the F(t) trick of `analysis.criticality`): a phase's time is the criticality of
its intervals (each instant's wall time split among the threads running then), so the phases'
times add up to the time anything ran, and a bottle graph per phase follows.

SimPoint's BIC alone over-splits here: the multinomial noise of sampled vectors is not
spherical after projection, so splitting one phase in two always raises the pooled-variance
BIC, and the 90% threshold then picks k = 5-7 for a program with a single phase (measured,
6 seeds) and one or two phases too many for 2-phase programs. So k is also capped
**[impl choice]** at the smallest k whose weighted squared error is within `noise_factor`
(1.5) of the squared error sampling noise alone would give (computed per interval from its own
samples, `noise_sse`): clusters beyond that model noise. Measured on 40 planted seeds (2-5
phases, 500 samples per interval): right k in 40/40 with the cap, 37/40 without;
single-phase programs: k = 1 in 6/6 with it, 0/6 without. ``noise_factor=None`` is plain SimPoint.

k-means starts from k-means++ seeds, not SimPoint's random rows (``init="random"`` restores
them): measured on planted phases, random starts ended in a poor local minimum often enough to
make BIC pick one phase too many (right k in 90% of 40 seeds vs 92.5%; 7 clusters instead of
the 6 planted in a 10^6-interval test).

Code regions: (binary, symbol) by default (procedure level, the spec's coarse option); with
``granularity="block"`` (binary, symbol, offset // block_bytes), a basic-block approximation.

Scaling: k-means is fitted on at most `max_fit` intervals (a uniform subsample, SimPoint's
``-sampleSize``); every interval is then labelled by its nearest centroid. Everything else is
O(samples * dims) NumPy.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from scalestack.analysis.criticality import timeline
from scalestack.errors import UserError
from scalestack.results import Result
from scalestack.trace import State, Trace

DEFAULT_INTERVAL_SAMPLES = 100


@dataclasses.dataclass(frozen=True)
class PhaseResult(Result):
    """Phases found in one or more runs.

    Attributes
    ----------
    k : chosen number of phases; phases are numbered 1..k, largest weight first.
    k_values, bic : the k tried and SimPoint's BIC score of each.
    intervals : dict of equal-length arrays, one row per kept interval: run, tid, index (per
        thread), first/last (an interval's samples are ``params["_sample_order"][run][first:last + 1]``,
        rows of that run's trace.samples by thread then time), n_samples, weight,
        t_start_ns, t_end_ns, running_ns, crit_ns, phase.
    projected : (N, dims) float32 projected vectors of the intervals.
    centroids : (k, dims).
    representative : row in `intervals` nearest each phase's centroid; weights : per phase.
    phases : per (run, phase) rows: share, time, running, parallelism, intervals, speedup.
    boxes : per (run, phase, thread) rows for the per-phase bottle graphs.
    runs : per run: label, n_threads (threads with samples), wall_ns.
    top_regions : per phase the most sampled regions and their share.
    dropped : intervals too short to cluster (< min_fraction of an interval, cut off by stalls):
        not used to fit k-means nor as representatives, but labelled by their nearest centroid
        (column ``fitted`` False), so the time they cover still counts in the phases' times.
    """

    k: int
    k_values: np.ndarray
    bic: np.ndarray
    intervals: dict[str, np.ndarray]
    projected: np.ndarray
    centroids: np.ndarray
    representative: np.ndarray
    weights: np.ndarray
    phases: list[dict[str, Any]]
    boxes: list[dict[str, Any]]
    runs: list[dict[str, Any]]
    top_regions: list[list[tuple[str, float]]]
    dropped: int
    params: dict[str, Any]

    kind = "phases"

    def rows(self) -> list[dict[str, Any]]:
        return self.phases

    def to_dict(self) -> dict[str, Any]:
        from scalestack.results import jsonable

        iv = self.intervals
        reps = [{"phase": c + 1, "run": int(iv["run"][r]), "tid": int(iv["tid"][r]), "index": int(iv["index"][r]),
                 "t_start_ns": int(iv["t_start_ns"][r]), "t_end_ns": int(iv["t_end_ns"][r]),
                 "weight": float(self.weights[c])} for c, r in enumerate(self.representative)]
        return jsonable({"k": self.k, "k_values": self.k_values, "bic": self.bic, "phases": self.phases,
                         "representatives": reps, "boxes": self.boxes, "runs": self.runs,
                         "top_regions": [[{"region": r, "share": s} for r, s in t] for t in self.top_regions],
                         "n_intervals": len(iv["run"]), "dropped": self.dropped,
                         "params": {k: v for k, v in self.params.items() if not k.startswith("_")}})

    def intervals_frame(self):
        """One row per interval (pandas)."""
        import pandas as pd

        return pd.DataFrame(self.intervals)

    def interval_metric(self, per_sample_cum: Sequence[np.ndarray]) -> np.ndarray:
        """Per-interval increase of a cumulative per-sample quantity (e.g. cycles), run by run."""
        iv = self.intervals
        out = np.zeros(len(iv["run"]))
        for r, cum in enumerate(per_sample_cum):  # interval rows index the run's samples through _sample_order
            m = iv["run"] == r
            order = np.asarray(self.params["_sample_order"][r])
            c = np.asarray(cum)[order]
            out[m] = c[iv["last"][m]] - c[iv["first"][m]]
        return out


# ----------------------------------------------------------------------------- intervals
def _intervals(trace: Trace, interval_samples: int | None, interval_ns: int | None, gap_factor: float,
               min_fraction: float) -> tuple[dict[str, np.ndarray], np.ndarray, int]:
    """Cut one run's samples into per-thread intervals; returns (intervals, interval id per sample, dropped).

    Samples are taken in (tid, time) order; the id array follows that order (-1: dropped).
    """
    sm = trace.samples
    order = np.lexsort((sm.time_ns, sm.tid))
    tid, t = sm.tid[order], sm.time_ns[order]
    n = len(tid)
    new_thread = np.r_[True, tid[1:] != tid[:-1]] if n else np.zeros(0, bool)
    gap = np.r_[0, np.diff(t)] if n else np.zeros(0, np.int64)
    starts = np.flatnonzero(new_thread)
    ends = np.r_[starts[1:], n]
    med = np.zeros(n)
    for s, e in zip(starts, ends, strict=True):  # one step per thread, not per sample
        g = gap[s + 1:e]
        med[s:e] = float(np.median(g)) if len(g) else 0.0
    stall = (~new_thread) & (med > 0) & (gap > gap_factor * med)
    seg_start = new_thread | stall
    seg_id = np.cumsum(seg_start) - 1
    seg_first = np.flatnonzero(seg_start)
    if interval_ns is not None:
        sub = (t - t[seg_first][seg_id]) // max(int(interval_ns), 1)
        overall_gap = float(np.median(gap[~seg_start])) if np.any(~seg_start) else float(interval_ns)
        full = max(interval_ns / max(overall_gap, 1.0), 1.0)
    else:
        sub = (np.arange(n) - seg_first[seg_id]) // interval_samples
        full = float(interval_samples)
    new_iv = seg_start | np.r_[True, sub[1:] != sub[:-1]] if n else np.zeros(0, bool)
    iv_id = np.cumsum(new_iv) - 1
    first = np.flatnonzero(new_iv)
    last = np.r_[first[1:], n] - 1
    count = last - first + 1
    weight = np.minimum(count / full, 1.0)
    keep = np.ones(len(first), dtype=bool)  # short intervals are kept, flagged not `fitted`
    sample_iv = iv_id
    f, la = first[keep], last[keep]
    ktid = tid[f]
    index = np.zeros(len(f), dtype=np.int64)
    if len(f):
        thread_start = np.r_[True, ktid[1:] != ktid[:-1]]
        pos = np.arange(len(f))
        index = pos - np.maximum.accumulate(np.where(thread_start, pos, 0))
    ivs = {"tid": ktid.astype(np.int64), "index": index, "first": f, "last": la, "n_samples": count[keep],
           "weight": weight[keep], "t_start_ns": (t[f] - med[f]).astype(np.int64), "t_end_ns": t[la].astype(np.int64),
           "fitted": weight >= min_fraction}
    return ivs, (sample_iv, order), int((weight < min_fraction).sum())


def _regions(trace: Trace, order: np.ndarray, granularity: str, block_bytes: int) -> tuple[np.ndarray, np.ndarray]:
    """Region code per sample (in `order`) and the region names."""
    sm = trace.samples
    binu, binc = np.unique(sm.binary[order].astype(str), return_inverse=True)
    symu, symc = np.unique(_symbols(trace, order), return_inverse=True)
    key = binc.astype(np.int64) * len(symu) + symc
    if granularity == "block":
        blk = np.asarray(sm.offset[order], dtype=np.int64) // block_bytes
        blku, blkc = np.unique(blk, return_inverse=True)
        key = key * len(blku) + blkc
        uk, inv = np.unique(key, return_inverse=True)
        names = [f"{binu[(k // len(blku)) // len(symu)]}:{symu[(k // len(blku)) % len(symu)]}"
                 f"+{int(blku[k % len(blku)]) * block_bytes:#x}" for k in uk]
    elif granularity == "symbol":
        uk, inv = np.unique(key, return_inverse=True)
        names = [f"{binu[k // len(symu)]}:{symu[k % len(symu)]}" for k in uk]
    else:
        raise UserError(f"granularity must be 'symbol' or 'block', not {granularity!r}")
    return inv, np.array(names, dtype=object)


def _symbols(trace: Trace, order: np.ndarray) -> np.ndarray:
    """The samples' functions (in `order`); a sample perf could not name, by its leaf frame's
    stretch of code (`where.frame_name`: a stripped program's function by its unwind
    entry) where it has a call stack: a stripped `git repack` or `sort` was one region,
    `[unknown]`, whatever code its threads ran."""
    sm = trace.samples
    sym = sm.symbol[order].astype(object)
    stack = sm.stack[order]
    unk = np.flatnonzero((sym == "[unknown]") & (stack >= 0))
    st, fr = trace.stacks, trace.frames
    if len(unk) and len(st) and len(fr):
        from scalestack.analysis.where import frame_name

        leaf = np.full(int(st.stack.max()) + 1, -1, np.int64)
        top = st.depth == 0
        leaf[st.stack[top]] = st.frame[top]
        f = leaf[np.clip(stack[unk], 0, len(leaf) - 1)]
        ok = (stack[unk] < len(leaf)) & (f >= 0)
        named = {x: frame_name(str(fr.symbol[x]), str(fr.binary[x]), int(fr.ip[x])) for x in np.unique(f[ok]).tolist()}
        sym[unk[ok]] = [named[x] for x in f[ok].tolist()]
    return sym.astype(str)


def projection_rows(names: Sequence[str], dims: int) -> np.ndarray:
    """(len(names), dims) uniform [-1, 1] rows, each seeded by a stable hash of its region name."""
    out = np.empty((len(names), dims))
    for i, name in enumerate(names):  # one step per distinct region
        seed = int.from_bytes(hashlib.blake2b(str(name).encode(), digest_size=8).digest(), "little")
        out[i] = np.random.default_rng(seed).uniform(-1.0, 1.0, dims)
    return out


# ----------------------------------------------------------------------------- clustering
def bic_score(x: np.ndarray, labels: np.ndarray, centroids: np.ndarray, w: np.ndarray | None = None) -> float:
    """SimPoint 3.x's bicScore of a k-means clustering (spec §1.4), weighted if `w` is given."""
    r_count, m = x.shape
    w = np.ones(r_count) if w is None else np.asarray(w, dtype=float)
    k = len(centroids)
    big_r = float(w.sum())
    sse = float(np.sum(w * np.sum((x - centroids[labels]) ** 2, axis=1)))
    s2 = max(sse / (m * big_r), 1e-300)
    rn = np.bincount(labels, weights=w, minlength=k)
    rn = rn[rn > 0]
    ll = float(np.sum(rn * np.log(rn / big_r))) - big_r * m / 2.0 * (np.log(2 * np.pi * s2) + 1.0)
    p = (k - 1) + m * k + 1
    return ll - p / 2.0 * np.log(big_r)


def choose_k(k_values: np.ndarray, bic: np.ndarray, threshold: float = 0.9) -> int:
    """Smallest k whose BIC reaches min + threshold * (max - min)."""
    lo, hi = float(np.min(bic)), float(np.max(bic))
    ok = bic >= lo + threshold * (hi - lo) - 1e-9 * max(abs(hi), 1.0)
    return int(k_values[int(np.argmax(ok))])


def cluster(x: np.ndarray, w: np.ndarray, k_max: int = 10, seed: int = 0, max_fit: int = 100_000,
            n_init: int = 5, max_iter: int = 100, threshold: float = 0.9, init: str = "k-means++",
            noise: np.ndarray | None = None, noise_factor: float = 1.5, fit_mask: np.ndarray | None = None):
    """k-means for k = 1..k_max with BIC selection; returns (k, k_values, bic, centroids, labels of all rows).

    noise: each row's expected squared distance from its true point due to sampling alone. When
    given, k is at most the smallest k whose weighted squared error is within `noise_factor` of
    the sampling noise: further clusters would only model noise (see `noise_sse`).
    fit_mask: rows that may be used for fitting (all by default); every row is labelled.
    """
    from sklearn.cluster import KMeans

    rng = np.random.default_rng(seed)
    n = len(x)
    cand = np.arange(n) if fit_mask is None else np.flatnonzero(fit_mask)
    if len(cand) == 0:
        cand = np.arange(n)
    fit = np.sort(rng.choice(cand, max_fit, replace=False)) if len(cand) > max_fit else cand
    xf, wf = x[fit], w[fit]
    distinct = len(np.unique(np.round(xf, 9), axis=0))
    ks = np.arange(1, max(1, min(k_max, distinct)) + 1)
    models, bics, sses = [], [], []
    for k in ks:
        km = KMeans(n_clusters=int(k), init=init, n_init=n_init, max_iter=max_iter, algorithm="lloyd",
                    random_state=seed).fit(xf, sample_weight=wf)
        models.append(km)
        bics.append(bic_score(xf, km.labels_, km.cluster_centers_, wf))
        sses.append(float(np.sum(wf * np.sum((xf - km.cluster_centers_[km.labels_]) ** 2, axis=1))))
    bic = np.array(bics)
    k = choose_k(ks, bic, threshold)
    if noise is not None:
        floor = noise_factor * float(np.sum(wf * noise[fit]))
        within = np.flatnonzero(np.array(sses) <= floor)
        if len(within):
            k = min(k, int(ks[within[0]]))
    cent = models[k - 1].cluster_centers_
    labels = _nearest(x, cent)
    return k, ks, bic, cent, labels


def noise_sse(crow: np.ndarray, cgid: np.ndarray, share: np.ndarray, proj: np.ndarray, x: np.ndarray,
              n_samples: np.ndarray) -> np.ndarray:
    """Per interval, the expected squared distance of its projected vector from the vector its
    code distribution would give with infinitely many samples: multinomial sampling noise,
    ``(sum_v p_v |P_v|^2 - |x|^2) / (n - 1)``, unbiased with the observed shares p."""
    second = np.bincount(crow, weights=share * np.sum(proj ** 2, axis=1)[cgid], minlength=len(x))
    return np.maximum(second - np.sum(x ** 2, axis=1), 0.0) / np.maximum(n_samples - 1, 1)


def _nearest(x: np.ndarray, cent: np.ndarray, chunk: int = 200_000) -> np.ndarray:
    out = np.empty(len(x), dtype=np.int64)
    c2 = np.sum(cent ** 2, axis=1)
    for s in range(0, len(x), chunk):  # chunks bound memory at N x k
        xs = x[s:s + chunk]
        out[s:s + chunk] = np.argmin(c2[None, :] - 2.0 * xs @ cent.T, axis=1)
    return out


# ----------------------------------------------------------------------------- time accounting
def running_and_criticality(trace: Trace, tid: np.ndarray, t0: np.ndarray, t1: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Running ns and criticality ns (∫ 1/r over its running time) of thread tid[i] within [t0[i], t1[i])."""
    s = trace.states
    m = s.state == State.RUNNING
    rtid, a, b = s.tid[m].astype(np.int64), s.start_ns[m], s.end_ns[m]
    if len(a) == 0 or len(tid) == 0:
        return np.zeros(len(tid)), np.zeros(len(tid))
    tl, where = timeline(a, b, trace.start_ns, trace.end_ns)
    fa, fb = tl.F[where[0:2 * len(a):2]], tl.F[where[1:2 * len(a):2]]
    order = np.lexsort((a, rtid))
    rtid, a, b, fa, fb = rtid[order], a[order], b[order], fa[order], fb[order]
    cum_run = np.r_[0, np.cumsum(b - a)]
    cum_crit = np.r_[0.0, np.cumsum(fb - fa)]
    base = int(min(a.min(), np.min(t0))) - 1
    scale = int(max(b.max(), np.max(t1))) - base + 1
    ka = rtid * scale + (a - base)

    def at(t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        q = tid.astype(np.int64) * scale + (np.asarray(t, dtype=np.int64) - base)
        k = np.searchsorted(ka, q, side="right") - 1
        kk = np.maximum(k, 0)
        valid = (k >= 0) & (rtid[kk] == tid)
        first_of_tid = np.searchsorted(rtid, tid, side="left")
        tc = np.minimum(np.asarray(t, dtype=np.int64), b[kk])
        inside = valid & (tc > a[kk])
        run = np.where(valid, cum_run[kk] + np.where(inside, tc - a[kk], 0), cum_run[first_of_tid])
        crit = np.where(valid, cum_crit[kk] + np.where(inside, tl.at(tc) - fa[kk], 0.0), cum_crit[first_of_tid])
        return run.astype(np.float64), crit

    r1, c1 = at(t1)
    r0, c0 = at(t0)
    return r1 - r0, c1 - c0


# ----------------------------------------------------------------------------- the analysis
def phases(traces: Trace | Sequence[Trace], *, interval_samples: int | None = DEFAULT_INTERVAL_SAMPLES,
           interval_ns: int | None = None, k_max: int = 10, dims: int = 15, granularity: str = "symbol",
           block_bytes: int = 64, gap_factor: float = 10.0, min_fraction: float = 0.1, seed: int = 0,
           max_fit: int = 100_000, labels: Sequence[str] | None = None, user_only: bool = True,
           init: str = "k-means++", bic_threshold: float = 0.9,
           noise_factor: float | None = 1.5) -> PhaseResult:
    """Find the phases of one run, or of several runs (a thread-count sweep) clustered together.

    Parameters
    ----------
    traces : Traces recorded with ``--sample`` (or simulated with `scalestack.sim.samples`).
    interval_samples : samples per interval (cpu-clock sampling: CPU time per interval); or
    interval_ns : fixed time per interval instead.
    k_max, dims, seed : k-means range, projection dimensions, randomness (spec defaults 10, 15).
    granularity : "symbol" (binary + function) or "block" (+ offset // block_bytes).
    gap_factor, min_fraction : stall cut (gap > factor x the thread's median sample gap) and
        the smallest partial interval kept (fraction of a full one).
    max_fit : fit k-means on at most this many intervals, then label all by nearest centroid.
    noise_factor : cap k where the clustering's error is within this factor of the sampling
        noise (None: SimPoint's BIC choice alone).
    init, bic_threshold : k-means seeding ("k-means++" or SimPoint's "random") and SimPoint's
        BIC threshold (smallest k reaching this fraction of the BIC range).
    user_only : drop samples in the kernel (binary ``[kernel...]``), as the paper's user-mode
        events do: a few syscall or interrupt samples otherwise split a phase in two.

    References
    ----------
    Perelman et al., "Detecting phases in parallel applications on shared memory
    architectures"; shared/spec/parallel-phases.md.
    """
    runs = [traces] if isinstance(traces, Trace) else list(traces)
    kept = [np.arange(len(tr.samples)) for tr in runs]
    if user_only:
        kept = [_user_rows(tr) for tr in runs]
        runs = [dataclasses.replace(tr, samples=tr.samples.take(k)) for tr, k in zip(runs, kept, strict=True)]
    if not runs:
        raise UserError("no trace given")
    if interval_ns is not None:
        interval_samples = None
    elif not interval_samples or interval_samples < 1:
        raise UserError("the interval must hold at least one sample")
    if dims < 1 or k_max < 1:
        raise UserError("dims and k-max must be at least 1")
    cols: dict[str, list[np.ndarray]] = {}
    region_parts, iv_parts, sample_orders, run_info = [], [], [], []
    dropped = 0
    for r, tr in enumerate(runs):
        if len(tr.samples) == 0:
            raise UserError(f"run {r + 1} has no samples: record it with 'scalestack record --sample'")
        ivs, (sample_iv, order), d = _intervals(tr, interval_samples, interval_ns, gap_factor, min_fraction)
        dropped += d
        reg, names = _regions(tr, order, granularity, block_bytes)
        region_parts.append((reg, names))
        iv_parts.append(sample_iv)
        sample_orders.append(kept[r][order])  # rows of the caller's trace.samples
        run_s, crit_s = running_and_criticality(tr, ivs["tid"], ivs["t_start_ns"], ivs["t_end_ns"])
        ivs["running_ns"], ivs["crit_ns"] = run_s, crit_s
        ivs["run"] = np.full(len(ivs["tid"]), r, dtype=np.int64)
        for k2, v in ivs.items():
            cols.setdefault(k2, []).append(v)
        label = labels[r] if labels is not None else str(tr.meta.get("label") or f"run{r + 1}")
        _, per_tid = np.unique(tr.samples.tid, return_counts=True)  # threads with >= 1% of the samples
        run_info.append({"run": r, "label": label, "n_threads": int(np.sum(per_tid >= 0.01 * len(tr.samples))),
                         "wall_ns": int(tr.wall_ns), "n_samples": int(len(tr.samples))})
    iv = {k2: np.concatenate(v) for k2, v in cols.items()}
    n = len(iv["run"])
    if n == 0:
        raise UserError("no interval is long enough: use fewer samples per interval (--interval-samples)")
    vocab = np.unique(np.concatenate([names for _, names in region_parts]).astype(str))
    proj = projection_rows(vocab, dims)
    x = np.zeros((n, dims))
    reg_all = []
    offset = 0
    for (reg, names), sample_iv in zip(region_parts, iv_parts, strict=True):
        gid = np.searchsorted(vocab, names.astype(str))[reg]
        keep = sample_iv >= 0
        rows = sample_iv[keep] + offset
        reg_all.append((rows, gid[keep]))
        offset += int(sample_iv.max()) + 1 if np.any(keep) else 0
    rows = np.concatenate([r for r, _ in reg_all])
    gids = np.concatenate([g for _, g in reg_all])
    cell, count = np.unique(rows * len(vocab) + gids, return_counts=True)  # sparse (interval, region) counts
    crow, cgid = cell // len(vocab), cell % len(vocab)
    share = count / np.maximum(iv["n_samples"], 1)[crow]  # each row a distribution over code
    for j in range(dims):
        x[:, j] = np.bincount(crow, weights=share * proj[cgid, j], minlength=n)
    noise = noise_sse(crow, cgid, share, proj, x, iv["n_samples"]) if noise_factor else None
    k, ks, bic, cent, lab = cluster(x, iv["weight"], k_max=k_max, seed=seed, max_fit=max_fit, init=init,
                                    threshold=bic_threshold, noise=noise, noise_factor=noise_factor or 0.0,
                                    fit_mask=iv["fitted"])
    # number phases by weight, largest first
    wsum = np.bincount(lab, weights=iv["weight"], minlength=k)
    rank = np.empty(k, dtype=np.int64)
    rank[np.argsort(-wsum, kind="stable")] = np.arange(k)
    lab = rank[lab]
    cent = cent[np.argsort(-wsum, kind="stable")]
    iv["phase"] = lab + 1
    weights = np.bincount(lab, weights=iv["weight"], minlength=k) / iv["weight"].sum()
    d2 = np.sum((x - cent[lab]) ** 2, axis=1)
    d2 = np.where(iv["fitted"], d2, np.inf)  # representatives are full intervals
    rep = np.array([int(np.flatnonzero(lab == c)[np.argmin(d2[lab == c])]) if np.any(lab == c) else -1
                    for c in range(k)])
    top = _top_regions(crow, cgid, count, lab, vocab, k)
    table, boxes = _phase_tables(runs, iv, k, run_info)
    params = {"interval_samples": interval_samples, "interval_ns": interval_ns, "k_max": k_max, "dims": dims,
              "granularity": granularity, "gap_factor": gap_factor, "min_fraction": min_fraction, "seed": seed,
              "max_fit": max_fit, "init": init, "bic_threshold": bic_threshold, "noise_factor": noise_factor,
              "fitted_on": int(min(int(iv["fitted"].sum()) or n, max_fit)), "_sample_order": sample_orders}
    return PhaseResult(k, ks, bic, iv, x.astype(np.float32), cent, rep, weights, table, boxes, run_info, top,
                       dropped, params)


def _user_rows(trace: Trace) -> np.ndarray:
    """Rows of trace.samples outside the kernel."""
    binary = trace.samples.binary.astype(str)
    kernel = np.char.startswith(binary, "[kernel") | np.char.startswith(binary, "[vdso")
    return np.flatnonzero(~kernel)


def _top_regions(crow, cgid, count, lab, vocab, k, top: int = 3) -> list[list[tuple[str, float]]]:
    counts = np.bincount(lab[crow] * len(vocab) + cgid, weights=count, minlength=k * len(vocab)).reshape(k, len(vocab))
    out = []
    for c in range(k):
        tot = counts[c].sum()
        best = np.argsort(-counts[c], kind="stable")[:top]
        out.append([(str(vocab[g]), float(counts[c, g] / tot)) for g in best if tot and counts[c, g] > 0])
    return out


def _phase_tables(runs, iv, k, run_info) -> tuple[list[dict], list[dict]]:
    table, boxes = [], []
    base_run = int(np.argmin([ri["n_threads"] for ri in run_info]))
    time_c = np.zeros((len(runs), k))
    for r in range(len(runs)):
        m = iv["run"] == r
        time_c[r] = np.bincount(iv["phase"][m] - 1, weights=iv["crit_ns"][m], minlength=k)
    for r, tr in enumerate(runs):
        m = iv["run"] == r
        ph = iv["phase"][m] - 1
        run_c = np.bincount(ph, weights=iv["running_ns"][m], minlength=k)
        cnt = np.bincount(ph, minlength=k)
        total = time_c[r].sum()
        names = dict(zip(tr.threads.tid.tolist(), tr.threads.name.tolist(), strict=True))
        for c in range(k):
            tc = time_c[r, c]
            table.append({"run": run_info[r]["label"], "n_threads": run_info[r]["n_threads"], "phase": c + 1,
                          "intervals": int(cnt[c]), "share_pct": 100.0 * tc / total if total else 0.0,
                          "time_ns": float(tc), "running_ns": float(run_c[c]),
                          "parallelism": float(run_c[c] / tc) if tc > 0 else 0.0,
                          "speedup": float(time_c[base_run, c] / tc) if tc > 0 and len(runs) > 1 else None,
                          "cpi": None})
            mc = m & (iv["phase"] == c + 1)
            for tid in np.unique(iv["tid"][mc]):
                mt = mc & (iv["tid"] == tid)
                h, a = float(iv["crit_ns"][mt].sum()), float(iv["running_ns"][mt].sum())
                boxes.append({"run": run_info[r]["label"], "phase": c + 1, "tid": int(tid),
                              "name": str(names.get(int(tid), tid)), "height_ns": h, "area_ns": a,
                              "width": a / h if h > 0 else 0.0})
    return table, boxes


def variance_reduction(result: PhaseResult, metric: np.ndarray) -> float:
    """(sigma_all - sum_c w_c sigma_c) / sigma_all of a per-interval metric (spec §3), weighted by interval weight."""
    w, ph = result.intervals["weight"], result.intervals["phase"] - 1

    def wstd(v, ww):
        mu = np.average(v, weights=ww)
        return float(np.sqrt(np.average((v - mu) ** 2, weights=ww)))

    s_all = wstd(metric, w)
    if s_all == 0:
        return 0.0
    s_ph = sum(w[ph == c].sum() / w.sum() * wstd(metric[ph == c], w[ph == c]) for c in range(result.k) if np.any(ph == c))
    return (s_all - s_ph) / s_all


def estimate(result: PhaseResult, metric: np.ndarray) -> tuple[float, float, float]:
    """Whole-run mean of a per-interval metric from the representatives only: (estimate, true, relative error)."""
    w = result.intervals["weight"]
    est = float(np.sum(result.weights * metric[result.representative]))
    true = float(np.average(metric, weights=w))
    return est, true, abs(est - true) / abs(true) if true else float("nan")
