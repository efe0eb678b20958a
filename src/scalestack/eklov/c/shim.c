/* scalestack's LD_PRELOAD shim for Eklov speedup stacks (spec section 2.2 and 2.4).
 *
 * SCALESTACK_SHIM_MODE selects what it does:
 *   phase     only pthread_create / pthread_join are timed: the parallel phase of a plain run;
 *   timing    + per-thread wait time in pthread_mutex_lock, pthread_spin_lock, pthread_barrier_wait
 *             and pthread_join (CLOCK_MONOTONIC around the real call); a lock taken by trylock on
 *             the first attempt did not wait and costs no clock read;
 *   isolate   timing + thread isolation: the thread created SCALESTACK_PROFILE_THREAD-th (0-based)
 *             runs alone between barriers, the others are held and catch up while it is held; only
 *             its time between barriers is summed (thread CPU time and monotonic time).  With
 *             SCALESTACK_PIRATE_CTL set, the pirate is driven through the control page
 *             (pirate_ctl.h): re-warmed before, run during, and parked after each segment.
 * Condition variables, rwlocks and semaphores are not supported by the method; their calls are only
 * counted (and, in isolation, the first one made by the profiled thread ends the isolation, since it
 * may wait for a held thread).  At exit the log is written as JSON to $SCALESTACK_SHIM_LOG (the
 * first process that loaded the shim) or $SCALESTACK_SHIM_LOG.<pid> (its children): to a temporary
 * name, then renamed.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "pirate_ctl.h"

#define MAXT 4096
#define MAXSEG 65536
#define ALL_RELEASED 0xffffffffu

enum { M_OFF, M_PHASE, M_TIMING, M_ISOLATE };
enum { U_COND, U_RWLOCK, U_SEM, U_NUNSUP };
static const char *unsup_name[U_NUNSUP] = {"condition variable", "rwlock", "semaphore"};

struct thr {
    int idx;                 /* creation index, -1 for threads the shim did not create (main) */
    pid_t tid;
    int64_t start, end, cpu_end;
    int64_t lock_wait, spin_wait, barrier_wait, join_wait, wake_ns;
    int64_t wait_cpu;        /* CPU time spent inside the timed waits and waking unlocks */
    int64_t cpu_create, cpu_join; /* its CPU time at its first pthread_create and its latest join */
    uint64_t lock_calls, lock_waits, barrier_calls, join_calls;
    uint32_t k;              /* barriers passed (isolation) */
    int ended;
};

struct seg { int64_t cpu, mono; uint64_t lines, pns; };

static int mode = M_OFF, owner = 0, profiled = 0, prof_cpu = -1;
static struct thr g_thr[MAXT];
static int g_nthr, g_overflow, g_created;
static int64_t proc_start, first_create, last_join, last_exit;
static uint64_t unsup[U_NUNSUP];
static __thread struct thr *me;

/* isolation */
static uint32_t p_arrived;            /* barriers the profiled thread has entered; ALL_RELEASED at its end */
static uint32_t parked;               /* held threads now waiting at the gate */
static int broken = 0;                /* isolation ended early (reason below) */
static const char *broken_why = "";
static struct seg segs[MAXSEG];
static int nseg, seg_overflow, pirate_lost;
static int64_t seg_cpu0, seg_mono0;
static struct ss_pirate_ctl *ctl;

static int (*real_create)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
static int (*real_join)(pthread_t, void **);
static void (*real_exit)(void *) __attribute__((noreturn));
static int (*real_barrier_wait)(pthread_barrier_t *);
static int (*real_mutex_lock)(pthread_mutex_t *);
static int (*real_mutex_trylock)(pthread_mutex_t *);
static int (*real_mutex_unlock)(pthread_mutex_t *);
static int (*real_spin_lock)(pthread_spinlock_t *);
static int (*real_spin_trylock)(pthread_spinlock_t *);
static int (*real_cond_wait)(pthread_cond_t *, pthread_mutex_t *);
static int (*real_cond_timedwait)(pthread_cond_t *, pthread_mutex_t *, const struct timespec *);
static int (*real_rdlock)(pthread_rwlock_t *);
static int (*real_wrlock)(pthread_rwlock_t *);
static int (*real_sem_wait)(sem_t *);
static int (*real_sem_timedwait)(sem_t *, const struct timespec *);

static int64_t clk(clockid_t c) {
    struct timespec ts;
    clock_gettime(c, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}
static int64_t mono(void) { return clk(CLOCK_MONOTONIC); }
static int64_t cpu(void) { return clk(CLOCK_THREAD_CPUTIME_ID); }

/* Reading the thread CPU clock is a system call (~600 ns here).  A timed wait reads it twice, each
 * time in the middle of the call: the half before the first reading and the half after the second
 * fall outside [c0, c1], so the CPU-time estimate would count one whole clock read per wait as work.
 * cpu_read_ns (the cheapest of a few back-to-back reads, calibrated at start) is added to the wait. */
static int64_t cpu_read_ns;

static void calibrate_cpu_read(void) {
    int64_t best = -1;
    for (int i = 0; i < 16; i++) {
        int64_t a = cpu(), b = cpu();
        if (best < 0 || b - a < best) best = b - a;
    }
    cpu_read_ns = best > 0 ? best : 0;
}

static void atomic_max(int64_t *p, int64_t v) {
    int64_t cur = __atomic_load_n(p, __ATOMIC_RELAXED);
    while (cur < v && !__atomic_compare_exchange_n(p, &cur, v, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
}

static long futex(uint32_t *addr, int op, uint32_t val, const struct timespec *ts) {
    return syscall(SYS_futex, addr, op, val, ts, NULL, 0);
}

#define LOAD(ptr) __atomic_load_n((ptr), __ATOMIC_ACQUIRE)
#define STORE(ptr, v) __atomic_store_n((ptr), (v), __ATOMIC_RELEASE)

static void resolve(void) {
    if (real_create) return;
#define R(name, sym) *(void **)(&name) = dlsym(RTLD_NEXT, sym)
    R(real_join, "pthread_join");
    R(real_exit, "pthread_exit");
    R(real_barrier_wait, "pthread_barrier_wait");
    R(real_mutex_lock, "pthread_mutex_lock");
    R(real_mutex_trylock, "pthread_mutex_trylock");
    R(real_mutex_unlock, "pthread_mutex_unlock");
    R(real_spin_lock, "pthread_spin_lock");
    R(real_spin_trylock, "pthread_spin_trylock");
    R(real_cond_wait, "pthread_cond_wait");
    R(real_cond_timedwait, "pthread_cond_timedwait");
    R(real_rdlock, "pthread_rwlock_rdlock");
    R(real_wrlock, "pthread_rwlock_wrlock");
    R(real_sem_wait, "sem_wait");
    R(real_sem_timedwait, "sem_timedwait");
    R(real_create, "pthread_create");
#undef R
}

static struct thr *reg(int idx) {
    static struct thr spill;  /* threads beyond MAXT share one record, and are counted */
    int slot = __atomic_fetch_add(&g_nthr, 1, __ATOMIC_RELAXED);
    struct thr *t;
    if (slot >= MAXT) {
        __atomic_fetch_add(&g_overflow, 1, __ATOMIC_RELAXED);
        t = &spill;
    } else {
        t = &g_thr[slot];
    }
    t->idx = idx;
    t->tid = (pid_t)syscall(SYS_gettid);
    t->start = mono();
    me = t;
    return t;
}

static struct thr *self(void) { return me ? me : reg(-1); }

/* ---- pirate control page ---- */

static int wait_state(uint32_t want) {
    struct timespec ts = {0, 100 * 1000000};
    int64_t t0 = mono();
    uint32_t s;
    while ((s = LOAD(&ctl->state)) != want) {
        if (mono() - t0 > 10LL * 1000000000) return -1;
        futex(&ctl->state, FUTEX_WAIT, s, &ts);
    }
    return 0;
}

static void command(uint32_t c) {
    STORE(&ctl->command, c);
    futex(&ctl->command, FUTEX_WAKE, 0x7fffffff, NULL);
}

static void pirate_open(void) {
    const char *path = getenv("SCALESTACK_PIRATE_CTL");
    if (!path || !*path) return;
    int fd = open(path, O_RDWR);
    if (fd < 0) { pirate_lost = 1; return; }
    void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) { pirate_lost = 1; return; }
    ctl = p;
    if (LOAD(&ctl->magic) != SS_PIRATE_MAGIC || LOAD(&ctl->version) != SS_PIRATE_VERSION) {
        pirate_lost = 1;
        ctl = NULL;
    }
}

/* ---- isolation ---- */

static void seg_begin(void) {
    if (ctl && !pirate_lost) {
        __atomic_fetch_add(&ctl->segment, 1, __ATOMIC_ACQ_REL);
        command(SS_WARM);
        if (wait_state(SS_WARMED) < 0) pirate_lost = 1;
        else command(SS_RUN);
    }
    seg_cpu0 = cpu();
    seg_mono0 = mono();
}

static void seg_end(void) {
    int64_t c = cpu(), m = mono();
    uint64_t lines = 0, pns = 0;
    if (ctl && !pirate_lost) {
        command(SS_PARK);
        if (wait_state(SS_PARKED) < 0) pirate_lost = 1;
        lines = __atomic_load_n(&ctl->seg_lines, __ATOMIC_ACQUIRE);
        pns = __atomic_load_n(&ctl->seg_ns, __ATOMIC_ACQUIRE);
    }
    if (nseg < MAXSEG) segs[nseg++] = (struct seg){c - seg_cpu0, m - seg_mono0, lines, pns};
    else seg_overflow++;
}

static void release_all(void) {
    STORE(&p_arrived, ALL_RELEASED);
    futex(&p_arrived, FUTEX_WAKE_PRIVATE, 0x7fffffff, NULL);
}

static void break_isolation(const char *why) {
    if (broken) return;
    broken = 1;
    broken_why = why;
    release_all();
}

/* A held thread waits here until the profiled thread has entered barrier number t->k + 1. */
static void gate(struct thr *t) {
    __atomic_fetch_add(&parked, 1, __ATOMIC_ACQ_REL);
    futex(&parked, FUTEX_WAKE_PRIVATE, 1, NULL);
    uint32_t v;
    while ((v = LOAD(&p_arrived)) != ALL_RELEASED && v <= t->k)
        futex(&p_arrived, FUTEX_WAIT_PRIVATE, v, NULL);
    __atomic_fetch_sub(&parked, 1, __ATOMIC_ACQ_REL);
}

/* The profiled thread waits (at most 200 ms) until every other live created thread is held. */
static void wait_parked(void) {
    struct timespec ts = {0, 1000000};
    int64_t t0 = mono();
    for (;;) {
        int others = 0;
        int n = LOAD(&g_nthr) < MAXT ? LOAD(&g_nthr) : MAXT;
        for (int i = 0; i < n; i++)
            if (g_thr[i].idx >= 0 && g_thr[i].idx != profiled && !LOAD(&g_thr[i].ended)) others++;
        uint32_t p = LOAD(&parked);
        if ((int)p >= others || mono() - t0 > 200000000) return;
        futex(&parked, FUTEX_WAIT_PRIVATE, p, &ts);
    }
}

static int isolating(struct thr *t) { return mode == M_ISOLATE && owner && t->idx >= 0; }

static void thread_end(struct thr *t) {
    if (t->ended) return;
    if (isolating(t) && t->idx == profiled) {
        seg_end();
        release_all();
    }
    t->end = mono();
    t->cpu_end = cpu();
    atomic_max(&last_exit, t->end);
    STORE(&t->ended, 1);
    if (mode == M_ISOLATE) futex(&parked, FUTEX_WAKE_PRIVATE, 1, NULL);
}

/* ---- wrappers ---- */

struct start { void *(*fn)(void *); void *arg; int idx; };

static void *trampoline(void *p) {
    struct start s = *(struct start *)p;
    free(p);
    struct thr *t = reg(s.idx);
    if (isolating(t)) {
        if (t->idx == profiled) {
            if (prof_cpu >= 0) {
                cpu_set_t set;
                CPU_ZERO(&set);
                CPU_SET(prof_cpu, &set);
                sched_setaffinity(0, sizeof set, &set);
            }
            seg_begin();
        } else {
            gate(t);
        }
    }
    void *r = s.fn(s.arg);
    thread_end(t);
    return r;
}

int pthread_create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *), void *arg) {
    resolve();
    if (mode == M_OFF) return real_create(th, attr, fn, arg);
    struct start *s = malloc(sizeof *s);
    if (!s) return EAGAIN;
    int64_t now = mono();
    int64_t zero = 0;
    __atomic_compare_exchange_n(&first_create, &zero, now, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
    struct thr *me_t = self();
    if (!me_t->cpu_create) me_t->cpu_create = cpu();
    s->fn = fn;
    s->arg = arg;
    s->idx = __atomic_fetch_add(&g_created, 1, __ATOMIC_RELAXED);
    int rc = real_create(th, attr, trampoline, s);
    if (rc) free(s);
    return rc;
}

void pthread_exit(void *ret) {
    resolve();
    if (mode != M_OFF) thread_end(self());
    real_exit(ret);
}

int pthread_join(pthread_t th, void **ret) {
    resolve();
    if (mode == M_OFF) return real_join(th, ret);
    struct thr *t = self();
    if (mode == M_ISOLATE && owner && !broken && LOAD(&g_created) <= profiled)
        break_isolation("the profiled thread was not created before the first pthread_join");
    if (isolating(t) && t->idx == profiled)  /* it may wait for a held thread */
        break_isolation("the profiled thread joined another thread");
    int64_t t0 = mono(), c0 = cpu();
    int rc = real_join(th, ret);
    t->wait_cpu += cpu() - c0 + cpu_read_ns;
    int64_t t1 = mono();
    t->join_wait += t1 - t0;
    t->join_calls++;
    t->cpu_join = cpu();
    atomic_max(&last_join, t1);
    return rc;
}

int pthread_barrier_wait(pthread_barrier_t *b) {
    resolve();
    if (mode < M_TIMING) return real_barrier_wait(b);
    struct thr *t = self();
    int64_t t0 = mono();
    int rc;
    if (isolating(t) && t->idx == profiled) {
        seg_end();
        t0 = mono();
        if (!broken) {
            STORE(&p_arrived, LOAD(&p_arrived) + 1);
            futex(&p_arrived, FUTEX_WAKE_PRIVATE, 0x7fffffff, NULL);
        }
        rc = real_barrier_wait(b);
        if (!broken) wait_parked();
        t->barrier_wait += mono() - t0;
        t->barrier_calls++;
        seg_begin();
        return rc;
    }
    int64_t c0 = cpu();
    rc = real_barrier_wait(b);
    if (isolating(t)) {
        t->k++;
        gate(t);
    }
    t->wait_cpu += cpu() - c0 + cpu_read_ns;
    t->barrier_wait += mono() - t0;
    t->barrier_calls++;
    return rc;
}

int pthread_mutex_lock(pthread_mutex_t *m) {
    resolve();
    if (mode < M_TIMING) return real_mutex_lock(m);
    struct thr *t = self();
    t->lock_calls++;
    int rc = real_mutex_trylock(m);
    if (rc != EBUSY) return rc;
    int64_t t0 = mono(), c0 = cpu();
    rc = real_mutex_lock(m);
    t->wait_cpu += cpu() - c0 + cpu_read_ns;
    t->lock_wait += mono() - t0;
    t->lock_waits++;
    return rc;
}

/* An unlock that must wake a waiter (glibc marks a mutex with waiters by lock word 2) makes a
 * futex system call: that is synchronization cost too, timed only in that case. */
int pthread_mutex_unlock(pthread_mutex_t *m) {
    resolve();
    if (mode < M_TIMING || __atomic_load_n(&m->__data.__lock, __ATOMIC_RELAXED) < 2) return real_mutex_unlock(m);
    struct thr *t = self();
    int64_t t0 = mono(), c0 = cpu();
    int rc = real_mutex_unlock(m);
    t->wait_cpu += cpu() - c0 + cpu_read_ns;
    t->wake_ns += mono() - t0;
    return rc;
}

int pthread_spin_lock(pthread_spinlock_t *l) {
    resolve();
    if (mode < M_TIMING) return real_spin_lock(l);
    struct thr *t = self();
    t->lock_calls++;
    int rc = real_spin_trylock(l);
    if (rc != EBUSY) return rc;
    int64_t t0 = mono(), c0 = cpu();
    rc = real_spin_lock(l);
    t->wait_cpu += cpu() - c0 + cpu_read_ns;
    t->spin_wait += mono() - t0;
    t->lock_waits++;
    return rc;
}

static void unsupported(int kind) {
    __atomic_fetch_add(&unsup[kind], 1, __ATOMIC_RELAXED);
    if (mode == M_ISOLATE && owner && !broken && me && me->idx == profiled) {
        static const char *why[U_NUNSUP] = {
            "the profiled thread waited on a condition variable",
            "the profiled thread took a rwlock",
            "the profiled thread waited on a semaphore"};
        break_isolation(why[kind]);
    }
}

int pthread_cond_wait(pthread_cond_t *c, pthread_mutex_t *m) {
    resolve();
    unsupported(U_COND);
    return real_cond_wait(c, m);
}

int pthread_cond_timedwait(pthread_cond_t *c, pthread_mutex_t *m, const struct timespec *ts) {
    resolve();
    unsupported(U_COND);
    return real_cond_timedwait(c, m, ts);
}

int pthread_rwlock_rdlock(pthread_rwlock_t *l) {
    resolve();
    unsupported(U_RWLOCK);
    return real_rdlock(l);
}

int pthread_rwlock_wrlock(pthread_rwlock_t *l) {
    resolve();
    unsupported(U_RWLOCK);
    return real_wrlock(l);
}

int sem_wait(sem_t *s) {
    resolve();
    unsupported(U_SEM);
    return real_sem_wait(s);
}

int sem_timedwait(sem_t *s, const struct timespec *ts) {
    resolve();
    unsupported(U_SEM);
    return real_sem_timedwait(s, ts);
}

/* ---- start and end of the process ---- */

/* A child forked without exec keeps this image: it is not the process being measured. */
static void forked_child(void) {
    owner = 0;
    ctl = NULL;
}

__attribute__((constructor)) static void shim_init(void) {
    resolve();
    proc_start = mono();
    const char *m = getenv("SCALESTACK_SHIM_MODE");
    if (!m || !*m) m = "timing";
    mode = !strcmp(m, "phase") ? M_PHASE : !strcmp(m, "timing") ? M_TIMING : !strcmp(m, "isolate") ? M_ISOLATE : M_OFF;
    char pid[32];
    snprintf(pid, sizeof pid, "%d", (int)getpid());
    const char *own = getenv("SCALESTACK_SHIM_OWNER");
    if (!own || !*own) {
        setenv("SCALESTACK_SHIM_OWNER", pid, 1);
        owner = 1;
    } else {
        owner = !strcmp(own, pid);
    }
    const char *p = getenv("SCALESTACK_PROFILE_THREAD");
    profiled = p ? atoi(p) : 0;
    p = getenv("SCALESTACK_PROFILE_CPU");
    prof_cpu = p && *p ? atoi(p) : -1;
    if (mode == M_ISOLATE && owner) pirate_open();
    pthread_atfork(NULL, NULL, forked_child);
    if (mode >= M_TIMING) calibrate_cpu_read();
    reg(-1);
}

/* CPU time of another thread of this process, by tid (the kernel's per-thread CPU clock id). */
static int64_t thread_cpu(pid_t tid) {
    struct timespec ts;
    clockid_t id = (clockid_t)((~(unsigned)tid) << 3) | 6;
    if (clock_gettime(id, &ts) != 0) return 0;
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void put_thr(FILE *f, const struct thr *t, int64_t now, int last) {
    int64_t end = t->ended ? t->end : now;
    fprintf(f, "{\"idx\":%d,\"tid\":%d,\"start_ns\":%lld,\"end_ns\":%lld,\"ended\":%d,\"cpu_ns\":%lld,"
               "\"lock_wait_ns\":%lld,\"spin_wait_ns\":%lld,\"barrier_wait_ns\":%lld,\"join_wait_ns\":%lld,\"wake_ns\":%lld,\"wait_cpu_ns\":%lld,\"cpu_create_ns\":%lld,\"cpu_join_ns\":%lld,"
               "\"lock_calls\":%llu,\"lock_waits\":%llu,\"barrier_calls\":%llu,\"join_calls\":%llu}%s\n",
            t->idx, (int)t->tid, (long long)t->start, (long long)end, t->ended, (long long)t->cpu_end,
            (long long)t->lock_wait, (long long)t->spin_wait, (long long)t->barrier_wait,
            (long long)t->join_wait, (long long)t->wake_ns, (long long)t->wait_cpu, (long long)t->cpu_create, (long long)t->cpu_join, (unsigned long long)t->lock_calls, (unsigned long long)t->lock_waits,
            (unsigned long long)t->barrier_calls, (unsigned long long)t->join_calls, last ? "" : ",");
}

__attribute__((destructor)) static void shim_fini(void) {
    const char *path = getenv("SCALESTACK_SHIM_LOG");
    if (!path || !*path || mode == M_OFF) return;
    int64_t now = mono();
    struct thr *main_t = self();
    main_t->cpu_end = cpu();
    char final[4096], tmp[4200];
    if (owner) snprintf(final, sizeof final, "%s", path);
    else snprintf(final, sizeof final, "%s.%d", path, (int)getpid());
    snprintf(tmp, sizeof tmp, "%s.tmp%d", final, (int)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) return;
    static const char *names[] = {"off", "phase", "timing", "isolate"};
    fprintf(f, "{\"version\":1,\"pid\":%d,\"owner\":%d,\"mode\":\"%s\",\"proc_start_ns\":%lld,\"proc_end_ns\":%lld,"
               "\"first_create_ns\":%lld,\"last_join_ns\":%lld,\"last_exit_ns\":%lld,\"created\":%d,"
               "\"thread_overflow\":%d,\"cpu_read_ns\":%lld,\n\"unsupported\":{",
            (int)getpid(), owner, names[mode], (long long)proc_start, (long long)now, (long long)first_create,
            (long long)last_join, (long long)last_exit, g_created, g_overflow, (long long)cpu_read_ns);
    for (int k = 0; k < U_NUNSUP; k++)
        fprintf(f, "\"%s\":%llu%s", unsup_name[k], (unsigned long long)unsup[k], k + 1 < U_NUNSUP ? "," : "");
    fprintf(f, "},\n\"threads\":[\n");
    int n = g_nthr < MAXT ? g_nthr : MAXT;
    for (int i = 0; i < n; i++) {
        struct thr t = g_thr[i];
        if (&g_thr[i] == main_t) t.end = now;
        else if (!t.ended) t.cpu_end = thread_cpu(t.tid);  /* still running at exit */
        put_thr(f, &t, now, i + 1 == n);
    }
    fprintf(f, "]");
    if (mode == M_ISOLATE && owner) {
        fprintf(f, ",\n\"isolation\":{\"profiled\":%d,\"profile_cpu\":%d,\"broken\":%d,\"broken_why\":\"%s\","
                   "\"pirate\":%d,\"pirate_lost\":%d,\"segment_overflow\":%d,\"segments\":[",
                profiled, prof_cpu, broken, broken_why, ctl != NULL, pirate_lost, seg_overflow);
        for (int i = 0; i < nseg; i++)
            fprintf(f, "%s[%lld,%lld,%llu,%llu]", i ? "," : "", (long long)segs[i].cpu, (long long)segs[i].mono,
                    (unsigned long long)segs[i].lines, (unsigned long long)segs[i].pns);
        fprintf(f, "]}");
    }
    fprintf(f, "}\n");
    if (fclose(f) == 0) rename(tmp, final);
    else unlink(tmp);
}
