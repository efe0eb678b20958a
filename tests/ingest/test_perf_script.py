"""The perf-script text parser: exact fields, clear errors, no crash on any input."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scalestack.errors import UserError
from scalestack.ingest.perf_script import parse_perf_script, sniff
from scalestack.trace.events import Kind

from ..conftest import requires_recording

SAMPLE = b"""\
# a comment line perf prints with --header
            b  2366/2366  [000]   319.095639875: sched:sched_process_exec: filename=./b pid=2366 old_pid=2366
            b  2366/2366  [000]   319.096384859: sched:sched_process_fork: comm=b pid=2366 child_comm=b child_pid=2368
            b  2366/2366  [000]   319.096390357:   sched:sched_wakeup_new: comm=b pid=2368 prio=120 target_cpu=001
  C2 CompilerThre  2366/2366  [000]   319.096449675:       sched:sched_switch: prev_comm=C2 CompilerThre prev_pid=2366 prev_prio=120 prev_state=R+ ==> next_comm=b next_pid=2368 next_prio=120
            b  2366/2368  [000]   319.102234881: syscalls:sys_enter_futex: uaddr: 0x5634e0243084, op: 0x00000080, val: 0x00000000, utime: 0x00000000, uaddr2: 0x5634e0243080, val3: 0x00000001
            b  2366/2368  [000]   319.102246208:       sched:sched_switch: prev_comm=b prev_pid=2368 prev_prio=120 prev_state=S ==> next_comm=swapper/0 next_pid=0 next_prio=120
      swapper     0/0     [001]   319.109068661:       sched:sched_wakeup: comm=b pid=2368 prio=120 target_cpu=000
            b  2366/2368  [000]   319.112053145:  syscalls:sys_exit_futex: 0xfffffffffffffff5
            b  2366/2368  [000]   319.113000000:     irq:irq_handler_entry: irq=1 name=foo
            b  2366/2368  [000]   319.114000000:         task:task_rename: pid=2368 oldcomm=b newcomm=worker 1 oom_score_adj=0
            b  2366/2368  [000]   319.115000000: sched:sched_switch: prev_comm=worker 1 prev_pid=2368 prev_prio=120 prev_state=X ==> next_comm=swapper/0 next_pid=0 next_prio=120
            b  2366/2368  [000]   319.116000000: sched:sched_stat_runtime: comm=b pid=2369 runtime=123456 [ns]
            b  2366/2368  [000]   319.117000000: sched:sched_migrate_task: comm=b pid=2369 prio=120 orig_cpu=0 dest_cpu=1
         perf  8445/8445  [000]  319.118000000: PERF_RECORD_LOST lost 4310
"""


def test_fields_of_each_event_kind():
    ev = parse_perf_script(SAMPLE)
    assert len(ev) == 12 and ev.stats["unknown_events"] == 1 and ev.stats["lost_events"] == 4310
    k = ev.kind.tolist()
    assert k == [Kind.EXEC, Kind.FORK, Kind.WAKEUP_NEW, Kind.SWITCH, Kind.FUTEX_ENTER, Kind.SWITCH, Kind.WAKEUP,
                 Kind.FUTEX_EXIT, Kind.RENAME, Kind.SWITCH, Kind.STAT_RUNTIME, Kind.MIGRATE]
    assert (ev.arg0[10], ev.arg1[10]) == (2369, 123456)
    assert (ev.arg0[11], ev.arg1[11], ev.arg2[11]) == (2369, 0, 1)
    assert ev.time[0] == 319_095_639_875
    assert ev.pid[0] == 2366 and ev.tid[4] == 2368 and ev.cpu[6] == 1
    sw = ev.take(np.flatnonzero(ev.kind == Kind.SWITCH))
    assert sw.arg0.tolist() == [2366, 2368, 2368] and sw.arg1.tolist() == [2368, 0, 0]
    assert sw.arg2.tolist() == [0, 1, 16]  # R+, S, X
    assert [ev.comm(i) for i in sw.comm0] == ["C2 CompilerThre", "b", "worker 1"]
    assert ev.arg0[4] == 0x5634E0243084 and ev.arg1[4] == 0x80
    assert ev.arg0[7] == -11  # -EAGAIN as unsigned 64-bit hex
    fork = np.flatnonzero(ev.kind == Kind.FORK)[0]
    assert (ev.arg0[fork], ev.arg1[fork]) == (2366, 2368)
    ren = np.flatnonzero(ev.kind == Kind.RENAME)[0]
    assert ev.comm(ev.comm0[ren]) == "worker 1" and ev.comm(ev.comm1[ren]) == "b"
    assert ev.arg1[2] == 1  # target cpu of the wakeup


def test_a_cpu_clock_sample_printed_without_its_address_is_skipped():
    """`perf script -F comm,pid,tid,cpu,time,event,trace` prints a cpu-clock sample as its event name
    alone: no address to keep, and no reason to refuse the file."""
    bare = b"       perf-exec  1378/1378  [000]  319.094000000: cpu-clock:\n"
    ev = parse_perf_script(bare + SAMPLE)
    assert len(ev) == 12 and ev.stats["unknown_events"] == 2


def test_default_format_without_pid_and_microseconds():
    text = b"         perf  2365 [000]   319.094769:       sched:sched_wakeup: comm=migration/0 pid=18 prio=0 target_cpu=000\n"
    ev = parse_perf_script(text)
    assert ev.pid.tolist() == [-1] and ev.tid.tolist() == [2365] and ev.time.tolist() == [319_094_769_000]


def test_garbled_line_names_its_number():
    bad = SAMPLE.replace(b"[001]   319.109068661", b"[001]   319,109068661")
    with pytest.raises(UserError, match="line 8"):
        parse_perf_script(bad)
    with pytest.raises(UserError, match="line 2"):
        parse_perf_script(b"# x\nhello world\n")


def test_truncated_file_reports_the_last_line(tmp_path):
    cut = SAMPLE[: SAMPLE.index(b"prev_pid=2368 prev_prio")]
    p = tmp_path / "cut.txt"
    p.write_bytes(cut)
    with pytest.raises(UserError, match="line 7"):
        parse_perf_script(p)


def test_sniff():
    assert sniff(SAMPLE)
    assert not sniff(b'{"traceEvents": []}')


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=400) | st.builds(lambda a, b, c: SAMPLE[:a] + c + SAMPLE[b:],
                                            st.integers(0, len(SAMPLE)), st.integers(0, len(SAMPLE)),
                                            st.binary(max_size=20)))
def test_any_input_gives_events_or_one_clear_error(data):
    try:
        ev = parse_perf_script(data)
    except UserError as exc:
        assert "\n" not in str(exc)
        return
    assert len(ev.time) == len(ev.kind)


@requires_recording
def test_real_recording_matches_perf_script_line_counts(c_programs, tmp_path):
    data = tmp_path / "perf.data"
    from scalestack.trace.events import RECORD_TRACEPOINTS
    subprocess.run(["perf", "record", "-q", "-a", "-k", "CLOCK_MONOTONIC", "-m", "16M", "-o", str(data), "-e",
                    ",".join(RECORD_TRACEPOINTS), "--", str(c_programs["mutex_counter"]), "2", "2000"], check=True)
    text = subprocess.run(["perf", "script", "-i", str(data), "-F", "comm,pid,tid,cpu,time,event,trace", "--ns"],
                          capture_output=True, check=True).stdout
    ev = parse_perf_script(text)
    lines = [ln for ln in text.decode().splitlines() if ln.strip()]
    assert len(ev) + ev.stats["unknown_events"] == len(lines)
    for name in ("sched:sched_switch", "syscalls:sys_enter_futex", "sched:sched_wakeup:"):
        kind = {"sched:sched_switch": Kind.SWITCH, "syscalls:sys_enter_futex": Kind.FUTEX_ENTER,
                "sched:sched_wakeup:": Kind.WAKEUP}[name]
        assert (ev.kind == kind).sum() == sum(f" {name}" in ln for ln in lines)
    assert np.all(np.diff(ev.time) >= 0)
