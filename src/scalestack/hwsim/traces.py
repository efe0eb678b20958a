"""Memory traces: the documented text format, a streaming lackey converter, and generators.

Text format (one access per line; `#` starts a comment)::

    <thread> <gap> <L|S> <hex address>

`thread` is a small integer, `gap` the instructions executed since the thread's previous access
(this one included), `L`/`S` load or store. Threads are the per-core streams of the simulator.
Synchronization events of multi-threaded traces use the same line shape, the address being the
lock or barrier's id (any hex number): `A` acquire a lock (spin, then yield, while another thread
holds it), `R` release it, `B` wait at a barrier until every unfinished thread has arrived.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from scalestack.errors import TraceFormatError, UserError
from scalestack.tools import which

CODES = ("L", "S", "A", "R", "B")  # engine.S_LOAD .. S_BARRIER


@dataclasses.dataclass(frozen=True)
class MemTrace:
    """Per-thread access streams, concatenated: thread t owns [offsets[t], offsets[t+1])."""

    offsets: np.ndarray
    gaps: np.ndarray
    addrs: np.ndarray
    stores: np.ndarray
    names: tuple[str, ...]

    @property
    def threads(self) -> int:
        return len(self.offsets) - 1

    def thread(self, t: int) -> MemTrace:
        a, b = self.offsets[t], self.offsets[t + 1]
        return MemTrace(np.array([0, b - a]), self.gaps[a:b], self.addrs[a:b], self.stores[a:b], (self.names[t],))


def from_arrays(streams: list[tuple[np.ndarray, np.ndarray, np.ndarray]], names: list[str] | None = None,
                separate: bool = True) -> MemTrace:
    """Build a trace from per-thread (gaps, addrs, stores); `separate` gives each thread its own
    address space (as separate programs have), by setting high address bits to the thread id."""
    offs = np.zeros(len(streams) + 1, np.int64)
    offs[1:] = np.cumsum([len(s[0]) for s in streams])
    gaps = np.concatenate([np.asarray(s[0], np.int64) for s in streams]) if streams else np.zeros(0, np.int64)
    addrs = np.concatenate([np.asarray(s[1], np.int64) + ((t + 1) << 44 if separate else 0)
                            for t, s in enumerate(streams)]) if streams else np.zeros(0, np.int64)
    stores = np.concatenate([np.asarray(s[2], np.uint8) for s in streams]) if streams else np.zeros(0, np.uint8)
    if np.any(gaps < 1):
        raise UserError("every access needs a gap of at least 1 instruction")
    return MemTrace(offs, gaps, addrs, stores, tuple(names or [f"t{t}" for t in range(len(streams))]))


def mix(traces: list[MemTrace]) -> MemTrace:
    """A multi-program mix: every single-threaded trace on its own core, own address space."""
    streams, names = [], []
    for tr in traces:
        if tr.threads > 1 and np.any(tr.stores >= 2):
            raise UserError(f"{tr.names[0].split(':')[0]}: a multi-threaded trace with locks/barriers cannot be mixed "
                            "(its threads share memory); run it alone with `hwsim run` or `hwsim stack`")
        for t in range(tr.threads):
            a, b = tr.offsets[t], tr.offsets[t + 1]
            streams.append((tr.gaps[a:b], tr.addrs[a:b] & ((1 << 44) - 1), tr.stores[a:b]))
            names.append(tr.names[t])
    return from_arrays(streams, names, separate=True)


def read_text(path: str | Path) -> MemTrace:
    """Parse the text format; a malformed or truncated line is reported by number."""
    p = Path(path)
    try:
        fh = open(p, errors="replace")
    except OSError as e:
        raise UserError(f"cannot read trace {p}: {e.strerror}") from None
    per: dict[int, list[list[int]]] = {}
    with fh:
        for no, raw in enumerate(fh, 1):
            s = raw.split("#", 1)[0].strip()
            if not s:
                continue
            f = s.split()
            try:
                if len(f) != 4 or f[2] not in CODES:
                    raise ValueError
                t, g, a = int(f[0]), int(f[1]), int(f[3], 16)
                if t < 0 or g < 1 or a < 0:
                    raise ValueError
            except ValueError:
                raise TraceFormatError(
                    f"{p}:{no}: malformed access {s[:60]!r}; expected '<thread> <gap>=1.. <L|S|A|R|B> <hex address>'"
                ) from None
            if not raw.endswith("\n"):
                raise TraceFormatError(f"{p}:{no}: truncated last line {s[:60]!r}")
            d = per.setdefault(t, [[], [], []])
            d[0].append(g)
            d[1].append(a)
            d[2].append(CODES.index(f[2]))
    if not per:
        raise TraceFormatError(f"{p}: no accesses")
    keys = sorted(per)
    return from_arrays([(np.array(per[k][0]), np.array(per[k][1]), np.array(per[k][2])) for k in keys],
                       [f"{p.stem}:{k}" for k in keys], separate=False)


def write_text(tr: MemTrace, path: str | Path) -> None:
    with open(path, "w") as fh:
        for t in range(tr.threads):
            a, b = tr.offsets[t], tr.offsets[t + 1]
            for g, ad, s in zip(tr.gaps[a:b], tr.addrs[a:b], tr.stores[a:b], strict=True):
                fh.write(f"{t} {g} {CODES[s]} {ad:x}\n")


def convert_lackey(lines, out_path: str | Path, source: str = "lackey") -> int:
    """Stream `valgrind --tool=lackey --trace-mem=yes` output into the text format (thread 0).

    Instruction fetches (`I`) count instructions; data lines `L`, `S` and `M` (modify = load then
    store) become accesses. Returns the number of accesses written.
    """
    gap = 0
    n = 0
    with open(out_path, "w") as out:
        for no, raw in enumerate(lines, 1):
            if not raw or raw[0] == "=":
                continue
            s = raw.strip()
            if not s:
                continue
            kind = s[0]
            if kind not in "ILSM":
                continue
            try:
                addr = int(s[1:].strip().split(",", 1)[0], 16)
            except ValueError:
                raise TraceFormatError(f"{source}:{no}: malformed lackey line {s[:60]!r}") from None
            if kind == "I":
                gap += 1
                continue
            g = max(gap, 1)
            gap = 0
            if kind == "M":
                out.write(f"0 {g} L {addr:x}\n0 1 S {addr:x}\n")
                n += 2
            else:
                out.write(f"0 {g} {kind} {addr:x}\n")
                n += 1
    return n


def trace_program(argv: list[str], out_path: str | Path, max_accesses: int | None = None) -> int:
    """Run a real program under valgrind lackey and convert its memory trace as it streams."""
    import itertools
    import subprocess

    if which("valgrind") is None:
        raise UserError("valgrind is not installed: apt-get install valgrind")
    proc = subprocess.Popen(["valgrind", "--tool=lackey", "--trace-mem=yes", "--log-fd=1", *argv],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1 << 20)
    assert proc.stdout is not None
    src = proc.stdout
    if max_accesses:
        src = itertools.islice(src, max_accesses * 3)
    try:
        n = convert_lackey(src, out_path, source=" ".join(argv))
    finally:
        proc.kill()
        proc.wait()
    return n


def generate(kind: str, n: int, working_set: int, *, gap: int = 4, store_frac: float = 0.2,
             stride: int = 64, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One synthetic stream: `stream`, `strided`, `random` or `chase` over `working_set` bytes."""
    rng = np.random.default_rng(seed)
    ws = max(64, int(working_set))
    if kind == "stream":
        addrs = (np.arange(n, dtype=np.int64) * 8) % ws
    elif kind == "strided":
        addrs = (np.arange(n, dtype=np.int64) * stride) % ws
    elif kind == "random":
        addrs = rng.integers(0, ws // 8, n, dtype=np.int64) * 8
    elif kind == "chase":
        lines = ws // 64
        perm = rng.permutation(lines).astype(np.int64)
        addrs = perm[np.arange(n) % lines] * 64
    else:
        raise UserError(f"unknown generator {kind!r}: use stream, strided, random or chase")
    gaps = np.maximum(1, rng.poisson(gap, n)).astype(np.int64)
    stores = (rng.random(n) < store_frac).astype(np.uint8)
    return gaps, addrs, stores


def parallel_kernel(kind: str, threads: int, accesses: int, working_set: int, *, shared: float = 0.1,
                    locks: int = 0, lock_every: int = 0, critical: int = 8, barriers: int = 0,
                    imbalance: float = 0.0, gap: int = 8, seed: int = 0) -> MemTrace:
    """A multi-threaded kernel patterned on PARSEC/SPLASH-2 behaviours, one stream per thread.

    Each thread works on its own slice of a `working_set`-byte array with the `kind` access
    pattern (stream, strided, random, chase), a `shared` fraction of its accesses going to a
    read-shared table (positive interference); every `lock_every` accesses it enters one of
    `locks` critical sections (acquire, `critical` accesses to the lock's data, release); the
    work is cut into `barriers` + 1 phases separated by barriers; `imbalance` gives thread t
    (1 + imbalance * t / (threads - 1)) times the base work per phase. `accesses` is the
    per-thread total without imbalance. All threads share one address space.
    """
    if threads < 1 or accesses < 1:
        raise UserError("parallel_kernel needs at least one thread and one access")
    rng = np.random.default_rng(seed)
    part = max(4096, working_set // threads)
    table = 1 << 40
    lockdata = 1 << 41
    streams = []
    phases = barriers + 1
    for t in range(threads):
        scale = 1.0 + (imbalance * t / (threads - 1) if threads > 1 else 0.0)
        per = max(1, int(accesses * scale / phases))
        gs, ads, sts = [], [], []
        for ph in range(phases):
            g, a, s = generate(kind, per, part, gap=gap, seed=seed * 7919 + t * 131 + ph)
            a = a + t * part
            sh = rng.random(per) < shared
            a[sh] = table + rng.integers(0, max(1, (working_set // 8) // 64), int(sh.sum())) * 64
            s[sh] = 0
            if locks and lock_every:
                cut = np.arange(lock_every, per, lock_every)
                pieces_g, pieces_a, pieces_s = np.split(g, cut), np.split(a, cut), np.split(s, cut)
                g2, a2, s2 = [pieces_g[0]], [pieces_a[0]], [pieces_s[0]]
                for j in range(1, len(pieces_g)):
                    lk = int(rng.integers(0, locks))
                    cs_a = lockdata + lk * 4096 + (np.arange(critical) % 8) * 64
                    g2 += [np.array([2]), np.full(critical, gap), np.array([2]), pieces_g[j]]
                    a2 += [np.array([lk]), cs_a, np.array([lk]), pieces_a[j]]
                    s2 += [np.array([2]), np.tile([0, 1], critical)[:critical], np.array([3]), pieces_s[j]]
                g, a, s = np.concatenate(g2), np.concatenate(a2), np.concatenate(s2)
            gs.append(g)
            ads.append(a)
            sts.append(s)
            if ph < phases - 1:
                gs.append(np.array([1]))
                ads.append(np.array([(1 << 20) + ph]))
                sts.append(np.array([4]))
        streams.append((np.concatenate(gs), np.concatenate(ads), np.concatenate(sts).astype(np.uint8)))
    return from_arrays(streams, [f"{kind}:{t}" for t in range(threads)], separate=False)


def without_sync(trace: MemTrace) -> MemTrace:
    """The same work as one sequential thread (the single-threaded version): every thread's accesses
    in order, sync events dropped, their instructions carried to the next access."""
    keep = trace.stores < 2
    cg = np.cumsum(trace.gaps)
    idx = np.flatnonzero(keep)
    g = np.diff(np.concatenate([[0], cg[idx]]))
    return from_arrays([(g, trace.addrs[idx], trace.stores[idx])], ["sequential"], separate=False)
