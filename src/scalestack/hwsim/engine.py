"""The compiled trace-driven multicore model and its per-thread cycle accounting counters.

One numba kernel walks every core's access stream in global time order (the core with the
smallest clock goes next). Per core: private L1 (LRU), an interval-analysis core (dispatch width
W, ROB of R entries: instruction i cannot dispatch before every load miss at least R instructions
older has returned, so misses within one ROB window overlap), a bounded MSHR table, a stride
prefetcher, a sampled auxiliary tag directory (ATD) and an open-row array (ORA). Shared: the LLC
(LRU, with the time each line becomes valid), DRAM banks with open-page row buffers, one data bus,
all served first come, first served in time order.

References
----------
Thesis Sec. 6.2.1 (counter architecture), 6.2.2 (methodology); spec `thesis-methods.md` Sec. 3.
"""

from __future__ import annotations

import numba
import numpy as np

# parameter vector indices (HwConfig.params)
P_LINE_SHIFT, P_L1_SETS, P_L1_WAYS, P_LLC_SETS, P_LLC_WAYS, P_LLC_LAT, P_MSHRS, P_W, P_ROB = range(9)
P_BANKS, P_ROW_SHIFT, P_TRP, P_TRCD, P_TCL, P_BUS, P_FIXED, P_FIXED_LAT, P_PF, P_PF_DEG, P_SAMPLED, P_WAITMODE = range(9, 21)
P_SPIN_LIMIT, P_SPIN_DETECT, P_WAKE = range(21, 24)
# ground-truth switches (eklov.py): no sync waits, LLC set-partitioned among the cores, private DRAM
# per core; pirate mode: the last core loops over its trace and re-warms it at every barrier
P_SYNCFREE, P_LLC_PART, P_PRIVMEM, P_PIRATE = range(24, 28)
# 1: sampled ATD set i is LLC set i*stride + (i mod stride) (low index bits vary), 0: i*stride
P_ATD_SPREAD = 28
# 1: an inter-thread miss's DRAM waiting behind other cores goes to the memory term, not the LLC term
P_INTER_SPLIT = 29

# access codes in `stores`: 0 load, 1 store; synchronization events (addr = dense lock/barrier id)
S_LOAD, S_STORE, S_ACQUIRE, S_RELEASE, S_BARRIER = range(5)
S_REWARM = 5  # wait kind: held while the pirate re-warms (pirate mode)

# per-core counter indices
COUNTERS = (
    "cycles", "instructions", "accesses", "l1_misses", "llc_accesses", "llc_misses",
    "sampled_accesses", "sampled_inter_misses", "sampled_intra_misses", "sampled_inter_hits",
    "sampled_inter_penalty", "sampled_intra_wait", "all_miss_penalty", "all_miss_wait",
    "llc_load_miss_stall", "llc_load_misses", "bus_wait", "bank_wait", "row_wait",
    "prefetches", "prefetch_wait", "wall_cycles",
    "spin_cycles", "spin_detected", "yield_cycles", "deadlock",
    "held_cycles", "rewarm_accesses", "rewarm_misses",
)
(C_CYC, C_INS, C_ACC, C_L1M, C_LLCA, C_LLCM, C_SACC, C_SINTERM, C_SINTRAM, C_SINTERH, C_SINTERPEN,
 C_SINTRAWAIT, C_ALLPEN, C_ALLWAIT, C_LMSTALL, C_LMISS, C_BUSW, C_BANKW, C_ROWW, C_PF, C_PFW, C_WALL,
 C_SPIN, C_SPIND, C_YIELD, C_DEAD, C_HELD, C_RWA, C_RWM) = range(len(COUNTERS))
NC = len(COUNTERS)

K_UNSAMPLED, K_INTRA, K_INTER, K_INTER_SPLIT = 0, 1, 2, 3


@numba.njit(cache=True, inline="always", error_model="numpy")
def _lookup(tags, stamps, base, ways, tag, now_stamp):
    """LRU lookup in one set starting at `base`; fills on miss. Returns (hit, slot)."""
    # unsigned indices: numba adds negative-index wraparound code to every signed index
    victim = np.uint64(base)
    oldest = stamps[victim]
    for w in range(ways):
        i = np.uint64(base + w)
        if tags[i] == tag:
            stamps[i] = now_stamp
            return True, np.int64(i)
        if stamps[i] < oldest:
            oldest = stamps[i]
            victim = i
    tags[victim] = tag
    stamps[victim] = now_stamp
    return False, np.int64(victim)


@numba.njit(cache=True, error_model="numpy")
def _dram_state(nb, n):
    """All DRAM state in one float64 vector (owners and row ids are exact integers in it), so the hot
    loop passes one array to `_dram` instead of nine: the calls' array marshalling cost more than the
    model itself (issue 9). Layout, with D = _dram_offsets(nb, n): bank_free [0, nb), bank_owner
    [nb, 2nb), open_row [2nb, 3nb), bus free/owner 3nb, 3nb+1, the last request's waits D[0]..+3,
    per-core shadow bus D[1]+core, shadow banks D[2]+core*nb+bank, open-row array (ORA) D[3]+core*nb+bank.
    """
    d = np.zeros(3 * nb + 6 + n + 2 * n * nb)
    d[nb:3 * nb] = -1.0
    d[3 * nb + 1] = -1.0
    d[3 * nb + 6 + n + n * nb:] = -1.0
    return d


@numba.njit(cache=True, inline="always", error_model="numpy")
def _dram_offsets(nb, n):
    return 3 * nb + 2, 3 * nb + 6, 3 * nb + 6 + n, 3 * nb + 6 + n + n * nb


@numba.njit(cache=True, inline="always", error_model="numpy")
def _row_latency(p, open_row, row):
    """Open-page DRAM: a row-buffer hit, an idle bank (activate), or a conflict (precharge first).
    Selects, not jumps: which of the three it is is random on a miss-heavy trace."""
    miss = open_row != row
    return p[P_TCL] + (p[P_TRCD] if miss else 0) + (p[P_TRP] if miss & (open_row >= 0) else 0)


@numba.njit(cache=True, inline="always", error_model="numpy")
def _dram(p, core, line, t, d, n):
    """Serve one line from memory issued at t (after the LLC lookup). Returns the done time.

    d is the DRAM state vector (`_dram_state`). d[W..W+2] receive this request's waiting caused by
    other cores: bus, bank, inter-thread row-buffer miss (closed-page minus open-page latency when
    this core's ORA entry matches). d[W+3] receives the shadow-timeline waiting: done minus the done
    time the same request would have had with only this core's own requests on its banks and the
    bus (per-core shadow busy-until registers beside the ORA) -- our extension, selected by
    wait_model="shadow".
    """
    nb = p[P_BANKS]
    W, SB, SK, ORA = _dram_offsets(nb, n)
    d[W] = 0.0
    d[W + 1] = 0.0
    d[W + 2] = 0.0
    swait = 0.0
    # inlined, with one exit and `d` last used after the branches: numba's reference-count pruning
    # then removes the atomic increment/decrement of `d` it put around every call (each one a full
    # memory fence on the host: 24% of the run time on random over 64 MB)
    if p[P_FIXED] != 0:
        done = t + p[P_FIXED_LAT]
    else:
        row_addr = line >> (p[P_ROW_SHIFT] - p[P_LINE_SHIFT])
        bank = row_addr & (nb - 1)
        row = row_addr >> 0  # bank bits stay in the row id: unique per (bank,row)
        tb = d[bank]
        bw = tb - t
        # branch-free (a select, not a jump): the comparisons are random on miss-heavy traces
        d[W + 1] = bw if (bw > 0.0) & (d[nb + bank] != core) else 0.0
        start = tb if tb > t else t
        ko = ORA + core * nb + bank
        # shadow: the same request on this core's private timeline (its own banks state and bus); only
        # the shadow and rule-d wait models and the private-memory truth switch read it
        shadow = p[P_WAITMODE] != 0 or p[P_PRIVMEM] != 0
        sdone = 0.0
        if shadow:
            ks = SK + core * nb + bank
            s0 = t if d[ks] <= t else d[ks]
            sready = s0 + _row_latency(p, d[ko], row)
            sb = sready if d[SB + core] <= sready else d[SB + core]
            sdone = sb + p[P_BUS]
            d[ks] = sready
            d[SB + core] = sdone
        if p[P_PRIVMEM] != 0:  # truth switch: this core's own DRAM, the shadow timeline is the real one
            d[ko] = row
            done = sdone
        else:
            cur = d[2 * nb + bank]
            # a row conflict another core's row caused
            d[W + 2] = float(p[P_TRP] + p[P_TRCD]) if (cur != row) & (cur >= 0) & (d[ko] == row) else 0.0
            ready = start + _row_latency(p, cur, row)
            bf = 3 * nb
            tf = d[bf]
            bw = tf - ready
            d[W] = bw if (bw > 0.0) & (d[bf + 1] != core) else 0.0
            bstart = tf if tf > ready else ready
            done = bstart + p[P_BUS]
            d[bank] = ready
            d[nb + bank] = core
            d[2 * nb + bank] = row
            d[ko] = row
            d[bf] = done
            d[bf + 1] = core
            if shadow and done > sdone:
                swait = done - sdone
    d[W + 3] = swait
    return done


def simulate(p, offsets, gaps, addrs, stores, cores, sched):
    """Run threads t = 0..len(offsets)-2 on cores[t]... one thread per core, to completion.

    Parameters
    ----------
    p : int64 parameter vector (HwConfig.params()).
    offsets : int64[n+1]; thread t's accesses are [offsets[t], offsets[t+1]).
    gaps : int64 instructions executed before each access (the access itself included).
    addrs : int64 byte addresses. stores : uint8, 1 for a store.
    cores : int64 thread ids to run (a subset replays threads alone: isolated ground truth).
    sched : int64[3] (slice cycles, cores, policy). slice 0: every thread has its own core until
        it ends. Otherwise programs time-share `cores` cores in slices; at each slice boundary
        policy 0 picks the next ones round-robin, policy 1 the ones with the least estimated
        isolated-equivalent progress (highest slowdown, thesis Sec. 7.2); the run stops when one
        program reaches the end of its trace. Private state (L1, ATD, ORA) follows the program.

    Returns
    -------
    float64[len(cores), NC] counters (see COUNTERS).
    """
    # the argument's type (bool or None), not its value, selects the compiled variant
    return _simulate(p, offsets, gaps, addrs, stores, cores, sched, True if cores.shape[0] == 1 else None)


@numba.njit(cache=True, error_model="numpy")
def _simulate(p, offsets, gaps, addrs, stores, cores, sched, single):
    """`simulate`, compiled apart for one core (`single` True) and for more (`single` None)."""
    n = 1 if single is not None else cores.shape[0]
    ls = p[P_LINE_SHIFT]
    l1s, l1w, llcs, llcw = p[P_L1_SETS], p[P_L1_WAYS], p[P_LLC_SETS], p[P_LLC_WAYS]
    W = float(p[P_W])
    # x / W == x * (1 / W) bit for bit when W is a power of two (the default 4): a multiply on the
    # clock's dependency chain instead of a division; any other width divides as before
    invW = 1.0 / W if (p[P_W] & (p[P_W] - 1)) == 0 else 0.0
    R = p[P_ROB]
    M = p[P_MSHRS]
    llc_lat = float(p[P_LLC_LAT])
    sampled = p[P_SAMPLED]
    sstride = llcs // sampled
    # both are powers of two (HwConfig.validate): mask and shift instead of a 64-bit idiv per access
    smask = sstride - 1
    sshift = 0
    while (1 << sshift) < sstride:
        sshift += 1
    # set s is sampled when its low bits equal its sample index's (spread) or are zero (aligned):
    # aligned sampled sets share their low index bits, so every power-of-two-strided stream in a mix
    # lands in all of them and they see more contention than the average set
    ssel = smask if p[P_ATD_SPREAD] != 0 else 0
    out = np.zeros((n, NC))
    l1_tags = np.full((n, l1s * l1w), -1, np.int64)
    l1_st = np.zeros((n, l1s * l1w), np.int64)
    llc_tags = np.full(llcs * llcw, -1, np.int64)
    llc_st = np.zeros(llcs * llcw, np.int64)
    llc_ready = np.zeros(llcs * llcw)
    llc_pfwait = np.zeros(llcs * llcw)
    llc_ispf = np.zeros(llcs * llcw, np.bool_)
    atd_tags = np.full((n, sampled * llcw), -1, np.int64)
    atd_st = np.zeros((n, sampled * llcw), np.int64)
    nb = p[P_BANKS]
    dram = _dram_state(nb, n)
    dw = _dram_offsets(nb, n)[0]  # the last request's waits: bus, bank, row, shadow
    pend_ins = np.zeros((n, M), np.int64)
    pend_done = np.zeros((n, M))
    pend_wait = np.zeros((n, M))
    pend_kind = np.zeros((n, M), np.int64)
    pend_head = np.zeros(n, np.int64)
    pend_cnt = np.zeros(n, np.int64)
    clock = np.zeros(n)
    instr = np.zeros(n, np.int64)
    pos = np.empty(n, np.int64)
    end = np.empty(n, np.int64)
    for c in range(n):
        pos[c] = offsets[cores[c]]
        end[c] = offsets[cores[c] + 1]
    pf_last = np.full(n, -1, np.int64)
    pf_stride = np.zeros(n, np.int64)
    stamp = 0
    alive = n
    done_flag = np.zeros(n, np.bool_)
    advanced = np.zeros(n, np.bool_)
    nsync = 1
    for c in range(n):
        for i in range(offsets[cores[c]], offsets[cores[c] + 1]):
            if stores[i] >= S_ACQUIRE and addrs[i] + 1 > nsync:
                nsync = addrs[i] + 1
    lock_owner = np.full(nsync, -1, np.int64)
    bar_count = np.zeros(nsync, np.int64)
    blocked = np.zeros(n, np.bool_)
    wait_kind = np.zeros(n, np.int64)
    wait_on = np.zeros(n, np.int64)
    wait_start = np.zeros(n)
    slice_len = float(sched[0])
    kc = min(sched[1], n) if sched[0] > 0 else n
    active = np.zeros(n, np.bool_)
    parked = np.zeros(n, np.bool_)
    run_start = np.zeros(n)
    run_cyc = np.zeros(n)
    for k in range(kc):
        active[k] = True
    rr = kc % n
    slice_end = slice_len if sched[0] > 0 else 1e300
    part = llcs // n if p[P_LLC_PART] != 0 else 0
    piv = n - 1 if p[P_PIRATE] != 0 else -1
    rewarm = piv >= 0
    warmed = False
    if piv >= 0:  # the profiled thread(s) wait for the pirate's first warm-up pass
        alive = n - 1
        for k in range(n - 1):
            blocked[k] = True
            wait_kind[k] = S_REWARM
    while alive > 0 or rewarm:
        if single is not None:  # compiled apart: c is the constant 0, which the compiler folds into every index
            c = 0
            c2 = 1  # the runner-up is read only with more cores; set so both variants type alike
            best2 = 1e300
            stuck = not active[0] or done_flag[0] or parked[0] or blocked[0]
        else:
            # the runnable core with the smallest clock (lowest index among equals) goes next; the
            # runner-up tells whether it may go on after its dispatch step without a new scan
            c = -1
            best = 1e300
            c2 = n
            best2 = 1e300
            for k in range(n):
                if not done_flag[k] and active[k] and not parked[k] and not blocked[k]:
                    v = clock[k]
                    if v < best:
                        c2 = c
                        best2 = best
                        c = k
                        best = v
                    elif v < best2:
                        c2 = k
                        best2 = v
            stuck = c < 0
        if stuck and sched[0] == 0:
            # every unfinished thread waits on a lock or barrier nobody will release
            for k in range(n):
                out[k, C_DEAD] = 1.0
            return out
        if stuck:
            # slice boundary: choose the programs for the next slice
            T = slice_end
            prog = np.empty(n)
            for k in range(n):
                prog[k] = _iso_estimate(out[k], run_cyc[k])
            chosen = np.zeros(n, np.bool_)
            if sched[2] == 0:
                for j in range(kc):
                    chosen[(rr + j) % n] = True
                rr = (rr + kc) % n
            else:
                order = np.argsort(prog, kind="mergesort")
                for j in range(kc):
                    chosen[order[j]] = True
            for k in range(n):
                active[k] = chosen[k]
                parked[k] = False
                if chosen[k]:
                    if clock[k] < T:
                        clock[k] = T
                    run_start[k] = clock[k]
            slice_end = T + slice_len
            continue
        if clock[c] >= slice_end:
            parked[c] = True
            run_cyc[c] += clock[c] - run_start[c]
            continue
        i = pos[c]
        if c == piv and i >= end[c]:
            if rewarm:  # a whole pass done and returned: release the held thread, the pirate loops on
                _drain(out, c, clock, pend_head, pend_cnt, pend_done, pend_wait, pend_kind, M)
                if alive == 0:  # the check pass after the last segment: every stolen line counted
                    return out
                if not warmed:  # the pirate's counters start after its first (cold) warm-up
                    warmed = True
                    out[c, C_LLCA] = out[c, C_LLCM] = out[c, C_RWA] = out[c, C_RWM] = 0.0
                rewarm = False
                for k in range(n - 1):
                    if blocked[k] and wait_kind[k] == S_REWARM:
                        if clock[c] > clock[k]:
                            out[k, C_HELD] += clock[c] - clock[k]
                            clock[k] = clock[c]
                        blocked[k] = False
            pos[c] = offsets[cores[c]]
            continue
        if i >= end[c] and sched[0] > 0:
            # time-sliced run: stop everything when the first program completes its trace
            wall = clock[c]
            for k in range(n):
                if active[k] and not parked[k]:
                    run_cyc[k] += clock[k] - run_start[k]
                out[k, C_CYC] = run_cyc[k]
                out[k, C_INS] = instr[k]
                out[k, C_WALL] = wall
            return out
        if i >= end[c]:
            # drain: the last instructions commit only after every outstanding miss returned
            while pend_cnt[c] > 0:
                h = pend_head[c]
                t = pend_done[c, h]
                if t > clock[c]:
                    _attribute(out, c, t - clock[c], pend_wait[c, h], pend_kind[c, h])
                    clock[c] = t
                pend_head[c] = h + 1 if h + 1 < M else 0
                pend_cnt[c] -= 1
            out[c, C_CYC] = clock[c]
            out[c, C_INS] = instr[c]
            out[c, C_WALL] = clock[c]
            done_flag[c] = True
            alive -= 1
            if piv >= 0 and alive == 0:  # one more re-warm pass, to count the lines stolen last
                rewarm = True
                pos[piv] = offsets[cores[piv]]
                advanced[piv] = False
                if clock[piv] < clock[c]:
                    clock[piv] = clock[c]
            if sched[0] == 0:
                for b in range(nsync):
                    if bar_count[b] > 0 and bar_count[b] >= alive:
                        bar_count[b] = 0
                        _release(out, p, b, S_BARRIER, clock[c], blocked, wait_kind, wait_on, wait_start, clock, n, False)
            continue
        first = not advanced[c]
        if first:
            # first move this core's clock to the access's dispatch time, then let every core
            # that is behind catch up, so requests reach the shared LLC and DRAM in time order
            advanced[c] = True
            g = gaps[i]
            instr[c] += g
            clock[c] += g * invW if invW > 0.0 else g / W
        # commit constraint: instruction `instr` dispatches only after misses >= R older returned
        while pend_cnt[c] > 0:
            h = pend_head[c]
            if pend_ins[c, h] + R > instr[c]:
                break
            x = instr[c] - pend_ins[c, h] - R
            t = pend_done[c, h] + (x * invW if invW > 0.0 else x / W)
            if t > clock[c]:
                _attribute(out, c, t - clock[c], pend_wait[c, h], pend_kind[c, h])
                clock[c] = t
            pend_head[c] = h + 1 if h + 1 < M else 0
            pend_cnt[c] -= 1
        if first and n > 1:
            # other cores' clocks did not move: if this one is still the earliest, it goes on now
            # (what a new scan would pick), else the earliest goes first
            still = clock[c] < best2 or (clock[c] == best2 and c < c2)
            if not still or clock[c] >= slice_end:
                continue
        advanced[c] = False
        pos[c] = i + 1
        now = clock[c]
        code = stores[i]
        if code >= S_ACQUIRE:
            if sched[0] > 0:
                continue  # time-shared single-threaded programs: no synchronization modelled
            # an atomic/fence: outstanding misses return first
            while pend_cnt[c] > 0:
                h = pend_head[c]
                t = pend_done[c, h]
                if t > clock[c]:
                    _attribute(out, c, t - clock[c], pend_wait[c, h], pend_kind[c, h])
                    clock[c] = t
                pend_head[c] = h + 1 if h + 1 < M else 0
                pend_cnt[c] -= 1
            now = clock[c]
            sid = addrs[i]
            if code == S_ACQUIRE:
                if lock_owner[sid] < 0 or p[P_SYNCFREE] != 0:
                    lock_owner[sid] = c
                else:
                    blocked[c] = True
                    wait_kind[c] = S_ACQUIRE
                    wait_on[c] = sid
                    wait_start[c] = now
            elif code == S_RELEASE:
                lock_owner[sid] = _release(out, p, sid, S_ACQUIRE, now, blocked, wait_kind, wait_on, wait_start,
                                           clock, n, True)
            elif piv >= 0:  # isolation: hold the profiled thread while the pirate re-warms its set
                blocked[c] = True
                wait_kind[c] = S_REWARM
                rewarm = True
                pos[piv] = offsets[cores[piv]]
                advanced[piv] = False
                if clock[piv] < now:
                    clock[piv] = now
            elif p[P_SYNCFREE] == 0:
                bar_count[sid] += 1
                if bar_count[sid] >= alive:
                    bar_count[sid] = 0
                    _release(out, p, sid, S_BARRIER, now, blocked, wait_kind, wait_on, wait_start, clock, n, False)
                else:
                    blocked[c] = True
                    wait_kind[c] = S_BARRIER
                    wait_on[c] = sid
                    wait_start[c] = now
            continue
        stamp += 1
        line = addrs[i] >> ls
        is_store = code == S_STORE
        out[c, C_ACC] += 1
        hit, _slot = _lookup(l1_tags[c], l1_st[c], (line & (l1s - 1)) * l1w, l1w, line, stamp)
        if hit:
            continue
        out[c, C_L1M] += 1
        out[c, C_LLCA] += 1
        s = line & (llcs - 1)
        is_sampled = (s & smask) == ((s >> sshift) & ssel)
        atd_hit = False
        if is_sampled:
            out[c, C_SACC] += 1
            atd_hit, _a = _lookup(atd_tags[c], atd_st[c], (s >> sshift) * llcw, llcw, line, stamp)
        qs = s if part == 0 else c * part + line % part
        llc_hit, slot = _lookup(llc_tags, llc_st, qs * llcw, llcw, line, stamp)
        if c == piv and rewarm:
            out[c, C_RWA] += 1
            if not llc_hit:
                out[c, C_RWM] += 1
        done = 0.0
        wait = 0.0
        kind = K_UNSAMPLED
        miss_like = False
        if llc_hit:
            if is_sampled and not atd_hit:
                out[c, C_SINTERH] += 1
            if llc_ready[slot] > now + llc_lat:  # late prefetch: wait for the line in flight
                done = llc_ready[slot]
                out[c, C_PFW] += done - now - llc_lat
                miss_like = True
                # rule (d): the prefetch was delayed by other cores; in isolation it would have been
                # that much earlier. Counted like an intra-thread miss's waiting cycles.
                wait = llc_pfwait[slot]
                # wait_model="rule-d": rule (d) taken literally -- the prefetch would have been timely in
                # isolation, so all of the load's wait for it is interference (default: only the
                # prefetch's own bus/bank waiting)
                if p[P_WAITMODE] == 3 and llc_ispf[slot]:
                    wait = done - now - llc_lat
                if is_sampled and atd_hit:
                    kind = K_INTRA
        else:
            out[c, C_LLCM] += 1
            done = _dram(p, c, line, now + llc_lat, dram, n)
            llc_ready[slot] = done
            llc_pfwait[slot] = 0.0
            llc_ispf[slot] = False
            wait = dram[dw] + dram[dw + 1] + dram[dw + 2] if p[P_WAITMODE] == 0 else dram[dw + 3]
            out[c, C_BUSW] += dram[dw]
            out[c, C_BANKW] += dram[dw + 1]
            out[c, C_ROWW] += dram[dw + 2]
            miss_like = True
            if is_sampled:
                if atd_hit:
                    out[c, C_SINTERM] += 1
                    kind = K_INTER_SPLIT if p[P_INTER_SPLIT] != 0 else K_INTER
                else:
                    out[c, C_SINTRAM] += 1
                    kind = K_INTRA
            if not is_store:
                out[c, C_LMISS] += 1
        # stride prefetcher on the L1-miss stream (own lines go into the ATD too: isolation prefetches them)
        if p[P_PF] != 0:
            st = line - pf_last[c]
            if pf_last[c] >= 0 and st != 0 and st == pf_stride[c] and st < 64 and st > -64:
                for d in range(1, p[P_PF_DEG] + 1):
                    pl = line + st * d
                    ps = pl & (llcs - 1)
                    pq = ps if part == 0 else c * part + pl % part
                    phit, pslot = _lookup(llc_tags, llc_st, pq * llcw, llcw, pl, stamp)
                    if (ps & smask) == ((ps >> sshift) & ssel):
                        _lookup(atd_tags[c], atd_st[c], (ps >> sshift) * llcw, llcw, pl, stamp)
                    if not phit:
                        out[c, C_PF] += 1
                        llc_ready[pslot] = _dram(p, c, pl, now + llc_lat, dram, n)
                        llc_ispf[pslot] = True
                        llc_pfwait[pslot] = ((dram[dw] + dram[dw + 1] + dram[dw + 2]) if p[P_WAITMODE] == 0
                                             else dram[dw + 3])
            pf_stride[c] = st
            pf_last[c] = line
        if miss_like and not is_store:
            if pend_cnt[c] == M:  # MSHRs full: wait for the oldest to return
                h = pend_head[c]
                t = pend_done[c, h]
                if t > clock[c]:
                    _attribute(out, c, t - clock[c], pend_wait[c, h], pend_kind[c, h])
                    clock[c] = t
                pend_head[c] = h + 1 if h + 1 < M else 0
                pend_cnt[c] -= 1
            j = pend_head[c] + pend_cnt[c]
            if j >= M:
                j -= M
            pend_ins[c, j] = instr[c]
            pend_done[c, j] = done
            pend_wait[c, j] = wait
            pend_kind[c, j] = kind
            pend_cnt[c] += 1
    return out


@numba.njit(cache=True, error_model="numpy")
def _release(out, p, sid, kind, t, blocked, wait_kind, wait_on, wait_start, clock, n, one):
    """Wake the waiters of lock/barrier `sid` at time t (`one`: only the oldest, FCFS lock handoff).

    A waiter spins for up to spin_limit cycles, then yields to the OS and pays the wake-up
    latency (spin-then-yield, as glibc and OpenMP runtimes do). Spinning is *detected* (the
    thesis's load table: a load returning the same value spin_detect cycles' worth of
    iterations) only when it lasted at least spin_detect cycles; then all of it counts.
    Returns the new owner (locks) or -1.
    """
    woken = -1
    best = 1e300
    for k in range(n):
        if blocked[k] and wait_kind[k] == kind and wait_on[k] == sid:
            if one:
                if wait_start[k] < best:
                    best = wait_start[k]
                    woken = k
            else:
                _wake(out, p, k, t, wait_start, clock)
                blocked[k] = False
    if one and woken >= 0:
        _wake(out, p, woken, t, wait_start, clock)
        blocked[woken] = False
    return woken


@numba.njit(cache=True, inline="always", error_model="numpy")
def _wake(out, p, k, t, wait_start, clock):
    w = t - wait_start[k]
    if w < 0.0:
        w = 0.0
    lim = float(p[P_SPIN_LIMIT])
    if w <= lim:
        spin = w
        y = 0.0
        nt = wait_start[k] + w
    else:
        spin = lim
        nt = wait_start[k] + w + p[P_WAKE]
        y = w - lim + p[P_WAKE]
    out[k, C_SPIN] += spin
    if spin >= p[P_SPIN_DETECT]:
        out[k, C_SPIND] += spin
    out[k, C_YIELD] += y
    if nt > clock[k]:
        clock[k] = nt


@numba.njit(cache=True, error_model="numpy")
def _drain(out, c, clock, pend_head, pend_cnt, pend_done, pend_wait, pend_kind, M):
    """Wait until every outstanding miss of core c has returned."""
    while pend_cnt[c] > 0:
        h = pend_head[c]
        t = pend_done[c, h]
        if t > clock[c]:
            _attribute(out, c, t - clock[c], pend_wait[c, h], pend_kind[c, h])
            clock[c] = t
        pend_head[c] = h + 1 if h + 1 < M else 0
        pend_cnt[c] -= 1


@numba.njit(cache=True, inline="always", error_model="numpy")
def _attribute(out, c, stall, wait, kind):
    """A miss blocked the head of a full ROB for `stall` cycles: charge the counters."""
    out[c, C_ALLPEN] += stall
    out[c, C_LMSTALL] += stall
    w = wait if wait < stall else stall
    out[c, C_ALLWAIT] += w
    if kind == K_INTER:
        out[c, C_SINTERPEN] += stall
    elif kind == K_INTER_SPLIT:  # its uncontended penalty is LLC interference, its queueing memory
        out[c, C_SINTERPEN] += stall - w
        out[c, C_SINTRAWAIT] += w
    elif kind == K_INTRA:
        out[c, C_SINTRAWAIT] += w


@numba.njit(cache=True, error_model="numpy")
def _iso_estimate(c, cycles):
    """Estimated isolated cycles from a counter vector (same formulas as accounting.estimate)."""
    scale = c[C_LLCA] / c[C_SACC] if c[C_SACC] > 0 else 0.0
    neg = c[C_SINTERPEN] * scale + c[C_SINTRAWAIT] * scale
    avg = max(c[C_LMSTALL] - neg, 0.0) / c[C_LMISS] if c[C_LMISS] > 0 else 0.0
    est = cycles - neg + c[C_SINTERH] * scale * avg
    return est if est > 0.0 else 0.0
