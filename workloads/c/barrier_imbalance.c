/* Two threads meet at a pthread barrier ROUNDS times; thread 1 does RATIO x the work of
 * thread 0 between barriers, so thread 0 waits at the barrier for about (RATIO-1)/RATIO of
 * the parallel section.  Usage: barrier_imbalance [ROUNDS=10] [WORK=2000000] [RATIO=3] [THREADS=2] [SHIFT=0]
 * With THREADS > 2, thread k does (k == THREADS-1 ? RATIO : 1) units (one slow thread).
 * SHIFT=1: the slow thread takes turns, round r's being thread r mod THREADS (the critical thread
 * changes between phases, as in the thesis's Lu non-cont.). */
#include "schedstat.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static pthread_barrier_t barrier;
static long rounds = 10, work = 2000000, ratio = 3, nthreads = 2, shift = 0;
static volatile double sink;

static void compute(long n) {
    double x = 0;
    for (long i = 0; i < n; i++) x += (double)(i & 1023) * 0.5;
    sink = x;
}

static void *worker(void *arg) {
    long id = (long)arg;
    for (long r = 0; r < rounds; r++) {
        long slow = shift ? r % nthreads : nthreads - 1;
        compute(work * (id == slow ? ratio : 1));
        pthread_barrier_wait(&barrier);
    }
    report_schedstat();
    return NULL;
}

int main(int argc, char **argv) {
    if (argc > 1) rounds = atol(argv[1]);
    if (argc > 2) work = atol(argv[2]);
    if (argc > 3) ratio = atol(argv[3]);
    if (argc > 4) nthreads = atol(argv[4]);
    if (argc > 5) shift = atol(argv[5]);
    if (nthreads < 1 || nthreads > 256) { fprintf(stderr, "bad thread count\n"); return 2; }
    pthread_t t[256];
    pthread_barrier_init(&barrier, NULL, (unsigned)nthreads);
    for (long i = 0; i < nthreads; i++) pthread_create(&t[i], NULL, worker, (void *)i);
    for (long i = 0; i < nthreads; i++) pthread_join(t[i], NULL);
    return 0;
}
