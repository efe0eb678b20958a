/* Each thread can report the kernel's own accounting of itself just before it ends.  When the
 * environment variable SCHEDSTAT_OUT names a file, report_schedstat() appends
 * "tid on_cpu_ns runqueue_ns monotonic_ns" to it (the last: when it read them, so a recording can
 * be compared up to that moment, not up to the thread's exit).  On-CPU time comes from CLOCK_THREAD_CPUTIME_ID, which
 * brings the runtime up to date first (the first field of /proc/thread-self/schedstat lags by
 * up to a scheduler tick for a running thread); run-queue time is the second schedstat field,
 * exact since the thread's last switch-in.  Tests compare these with a recording's RUNNING and
 * RUNNABLE times: the kernel's truth on real hardware. */
#ifndef SCHEDSTAT_H
#define SCHEDSTAT_H
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t schedstat_lock = PTHREAD_MUTEX_INITIALIZER;

static unsigned long long mono_ns(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (unsigned long long)now.tv_sec * 1000000000ULL + (unsigned long long)now.tv_nsec;
}

/* Read both figures with nothing in between: a reading the thread was preempted during (the
 * clock moved more than 200 us across it) is taken again, so "at" is the moment they held. */
static void report_schedstat(void) {
    const char *out = getenv("SCHEDSTAT_OUT");
    if (!out) return;
    unsigned long long run = 0, wait = 0, stale = 0, t0 = 0, t1 = 0;
    struct timespec ts;
    char buf[256];
    for (int tries = 0; tries < 20; tries++) {
        t0 = mono_ns();
        FILE *f = fopen("/proc/thread-self/schedstat", "r");
        if (!f) return;
        if (!fgets(buf, sizeof buf, f) || sscanf(buf, "%llu %llu", &stale, &wait) != 2) { fclose(f); return; }
        fclose(f);
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
        t1 = mono_ns();
        if (t1 - t0 < 200000) break;
    }
    run = (unsigned long long)ts.tv_sec * 1000000000ULL + (unsigned long long)ts.tv_nsec;
    (void)stale;
    unsigned long long at = t1; /* run_delay changes only at a switch-in, and there was none since t0 */
    pthread_mutex_lock(&schedstat_lock);
    FILE *o = fopen(out, "a");
    if (o) { fprintf(o, "%ld %llu %llu %llu\n", (long)syscall(SYS_gettid), run, wait, at); fclose(o); }
    pthread_mutex_unlock(&schedstat_lock);
}
#endif
