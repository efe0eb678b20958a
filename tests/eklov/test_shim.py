"""The LD_PRELOAD shim on real programs compiled here: wait times known by construction, barrier
semantics and a never-waiting profiled thread under isolation, unsupported primitives named."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from scalestack.eklov import shim
from scalestack.errors import UserError

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")

MS = 1_000_000

# Thread 0 holds the mutex across the first barrier and 100 ms beyond it, so thread 1 waits ~100 ms
# for the lock; thread 0 then sleeps 50 ms more before the second barrier, where thread 1 (arriving
# right after it got the lock) waits ~50 ms; thread 1 sleeps 80 ms after it, so thread 0 ends 80 ms
# early (join imbalance).  Sleeping is work as far as the method is concerned.
KNOWN_WAITS = r"""
#include <pthread.h>
#include <stdio.h>
#include <time.h>
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t b;
static void ms(long n) { struct timespec ts = {n / 1000, (n % 1000) * 1000000}; nanosleep(&ts, NULL); }
static void *t0(void *a) { pthread_mutex_lock(&m); pthread_barrier_wait(&b); ms(100); pthread_mutex_unlock(&m);
                           ms(50); pthread_barrier_wait(&b); return a; }
static void *t1(void *a) { pthread_barrier_wait(&b); pthread_mutex_lock(&m); pthread_mutex_unlock(&m);
                           pthread_barrier_wait(&b); ms(80); return a; }
int main(void) { pthread_t a, c; pthread_barrier_init(&b, NULL, 2);
  pthread_create(&a, NULL, t0, NULL); pthread_create(&c, NULL, t1, NULL);
  pthread_join(a, NULL); pthread_join(c, NULL); puts("ok"); return 0; }
"""

# Every thread publishes its round number, meets the others, then checks that all of them published
# it (fails if a barrier let anyone through early), and takes a shared lock in its inner loop.
# Thread k (k = argv[2]) records the most threads it ever saw inside their segments at once.
BARRIER_CHECK = r"""
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
static pthread_barrier_t b; static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static long n, rounds = 12, watch, round_of[64]; static volatile long inside, max_seen, shared, bad;
static void *w(void *arg) { long id = (long)arg;
  for (long r = 0; r < rounds; r++) {
    __atomic_add_fetch(&inside, 1, __ATOMIC_SEQ_CST);
    for (long j = 0; j < 3000; j++) {
      volatile double x = 0; for (int k = 0; k < 300; k++) x += k;
      pthread_mutex_lock(&m); shared++; pthread_mutex_unlock(&m);
      long s = __atomic_load_n(&inside, __ATOMIC_SEQ_CST);
      if (id == watch && s > max_seen) max_seen = s; }
    round_of[id] = r;
    __atomic_sub_fetch(&inside, 1, __ATOMIC_SEQ_CST);
    pthread_barrier_wait(&b);
    for (long k = 0; k < n; k++) if (round_of[k] != r) bad++;
    pthread_barrier_wait(&b); }
  return NULL; }
int main(int argc, char **argv) { n = atol(argv[1]); watch = argc > 2 ? atol(argv[2]) : 0;
  pthread_t t[64]; pthread_barrier_init(&b, NULL, n);
  for (long i = 0; i < n; i++) pthread_create(&t[i], NULL, w, (void *)i);
  for (long i = 0; i < n; i++) pthread_join(t[i], NULL);
  printf("bad %ld max_seen %ld shared %ld\n", bad, max_seen, shared); return bad != 0; }
"""


@pytest.fixture(scope="module")
def progs(tmp_path_factory):
    out = tmp_path_factory.mktemp("shimprogs")
    built = {}
    for name, src in (("known_waits", KNOWN_WAITS), ("barrier_check", BARRIER_CHECK)):
        c = out / f"{name}.c"
        c.write_text(src)
        subprocess.run(["gcc", "-O1", "-Wall", "-pthread", str(c), "-o", str(out / name)], check=True)
        built[name] = str(out / name)
    return built


def _by_idx(log):
    return {t["idx"]: t for t in log.threads}


def test_timing_sums_known_waits(progs):
    log = shim.run([progs["known_waits"]], "timing").log
    th = _by_idx(log)
    assert log.created == 2 and set(th) == {-1, 0, 1}
    t0, t1 = th[0], th[1]
    assert t1["lock_wait_ns"] == pytest.approx(100 * MS, abs=10 * MS)
    assert t1["barrier_wait_ns"] == pytest.approx(50 * MS, abs=10 * MS)
    assert t0["lock_wait_ns"] == 0 and t0["barrier_wait_ns"] < 10 * MS
    assert t1["lock_waits"] == 1 and t0["lock_waits"] == 0 and t0["lock_calls"] == 1
    # the join is a barrier: thread 0's 80 ms early end is not its work; main only waited in join
    assert log.phase_ns == pytest.approx(230 * MS, abs=25 * MS)
    busy = dict(zip([t["idx"] for t in log.threads], log.busy_ns().tolist(), strict=True))
    assert busy[0] == pytest.approx(150 * MS, abs=15 * MS)
    assert busy[1] == pytest.approx(80 * MS, abs=15 * MS)
    assert busy[-1] < 10 * MS
    assert log.nosync_ns() == pytest.approx(150 * MS, abs=15 * MS)
    assert th[-1]["join_wait_ns"] == pytest.approx(log.phase_ns, abs=5 * MS)
    assert log.unsupported_warning() is None


def test_phase_mode_times_only_the_phase(progs):
    log = shim.run([progs["known_waits"]], "phase").log
    assert log.phase_ns == pytest.approx(230 * MS, abs=25 * MS)
    assert all(t["lock_calls"] == 0 and t["barrier_wait_ns"] == 0 for t in log.threads)


@pytest.mark.parametrize("n,profiled", [(2, 0), (3, 1), (3, 2)])
def test_isolation_keeps_barriers_and_profiled_thread_never_waits(progs, n, profiled):
    res = shim.run([progs["barrier_check"], str(n), str(profiled)], "isolate", profile_thread=profiled,
                   profile_cpu=0, quiet=False)
    log = res.log
    iso = log.isolation
    assert iso is not None and not iso.broken and iso.profiled == profiled
    th = _by_idx(log)[profiled]
    assert th["lock_calls"] == 12 * 3000
    assert th["lock_waits"] == 0 and th["lock_wait_ns"] == 0       # never met a held lock
    assert th["barrier_calls"] == 24 and len(iso.segments) == 25   # one segment between each pair of barriers
    # only the segments are timed: the profiled thread's held time is left out
    assert iso.mono_ns < th["end_ns"] - th["start_ns"] - th["barrier_wait_ns"] + 5 * MS
    assert iso.cpu_ns <= iso.mono_ns + MS


def test_isolation_output_and_exclusivity(progs):
    proc = subprocess.run([progs["barrier_check"], "3", "1"], capture_output=True, text=True,
                          env=_shim_env("isolate", profiled=1))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    bad, max_seen = int(proc.stdout.split()[1]), int(proc.stdout.split()[3])
    assert bad == 0
    assert max_seen == 1   # the profiled thread never saw another thread inside its segment


def _shim_env(mode, profiled=0):
    import os

    from scalestack.eklov.build import build

    env = {k: v for k, v in os.environ.items() if not k.startswith("SCALESTACK_")}
    env.update(LD_PRELOAD=build("shim"), SCALESTACK_SHIM_MODE=mode, SCALESTACK_PROFILE_THREAD=str(profiled))
    return env


def test_condition_variables_are_named(c_programs):
    log = shim.run([str(c_programs["prodcons"]), "2000", "2", "100"], "timing").log
    assert log.unsupported["condition variable"] > 0
    assert "condition variable" in log.unsupported_warning()


def test_isolation_ends_when_profiled_thread_waits_on_a_condvar(c_programs):
    # the consumers wait on condition variables the producer (main) signals: isolation must not hang
    log = shim.run([str(c_programs["prodcons"]), "2000", "2", "100"], "isolate", timeout=60).log
    assert log.isolation.broken and "condition variable" in log.isolation.broken_why


def test_static_program_refused(tmp_path):
    c = tmp_path / "s.c"
    c.write_text("int main(void) { return 0; }\n")
    exe = tmp_path / "s"
    if subprocess.run(["gcc", "-static", str(c), "-o", str(exe)], capture_output=True).returncode != 0:
        pytest.skip("no static libc to link with")
    with pytest.raises(UserError, match="not dynamically linked"):
        shim.run([str(exe)], "timing")
    script = tmp_path / "wrap.sh"
    script.write_text(f"#!{exe}\n")
    script.chmod(0o755)
    with pytest.raises(UserError, match="not dynamically linked"):
        shim.check_preloadable([str(script)])
    assert shim.check_preloadable(["sh"]).endswith("sh")


def test_missing_command_and_failing_program(tmp_path):
    with pytest.raises(UserError, match="command not found"):
        shim.run(["no-such-program-xyz"], "timing")
    with pytest.raises(UserError, match="status 3"):
        shim.run(["sh", "-c", "exit 3"], "timing")


def test_forked_child_does_not_overwrite_the_log(tmp_path):
    src = tmp_path / "f.c"
    src.write_text(r"""
#include <pthread.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
static void *w(void *a) { usleep(20000); return a; }
int main(void) { pthread_t t; pthread_create(&t, NULL, w, NULL); pthread_join(t, NULL);
  pid_t p = fork(); if (p == 0) exit(0); waitpid(p, NULL, 0); return 0; }
""")
    exe = tmp_path / "f"
    subprocess.run(["gcc", "-O1", "-pthread", str(src), "-o", str(exe)], check=True)
    res = shim.run([str(exe)], "timing")
    assert res.log.created == 1 and res.log.phase_ns >= 20 * MS
    assert len(res.others) == 1 and res.others[0].pid != res.log.pid  # the child wrote its own file
    assert shim.threaded_log(res) is res.log


def test_profiled_thread_joining_a_held_thread_does_not_hang(tmp_path):
    # thread 0 (profiled) creates thread 2 and joins it: thread 2 is held at its start, so isolation
    # must give way instead of deadlocking
    src = tmp_path / "j.c"
    src.write_text(r"""
#include <pthread.h>
#include <unistd.h>
static void *leaf(void *a) { usleep(1000); return a; }
static void *w0(void *a) { pthread_t t; pthread_create(&t, NULL, leaf, NULL); pthread_join(t, NULL); return a; }
int main(void) { pthread_t a, b; pthread_create(&a, NULL, w0, NULL); pthread_create(&b, NULL, leaf, NULL);
  pthread_join(a, NULL); pthread_join(b, NULL); return 0; }
""")
    exe = tmp_path / "j"
    subprocess.run(["gcc", "-O1", "-pthread", str(src), "-o", str(exe)], check=True)
    log = shim.run([str(exe)], "isolate", profile_thread=0, timeout=30).log
    assert log.created == 3 and log.isolation.broken
    assert log.isolation.broken_why == "the profiled thread joined another thread"


def test_cpu_clock_read_is_calibrated_and_charged_to_the_wait(progs):
    """A timed wait reads the thread CPU clock twice (a system call each), each reading in the middle of
    its call: the calibrated cost of one read is added to the wait's CPU, not left in the work."""
    log = shim.run([progs["known_waits"]], "timing").log
    assert 10 <= log.cpu_read_ns <= 100_000
    t1 = _by_idx(log)[1]
    assert t1["lock_waits"] == 1 and t1["wait_cpu_ns"] >= log.cpu_read_ns
    assert shim.run([progs["known_waits"]], "phase").log.cpu_read_ns == 0  # phase mode times no wait
