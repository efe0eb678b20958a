/* THREADS threads increment one shared counter under a pthread mutex ITERS times each, doing
 * OUTSIDE units of private work between increments.  On a 2-core machine 4 threads contend for
 * both the lock (SYNC_WAIT) and the CPUs (RUNNABLE).
 * Usage: mutex_counter [THREADS=4] [ITERS=200000] [OUTSIDE=50] [INSIDE=50] */
#include "schedstat.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static long counter, iters = 200000, outside = 50, inside = 50;
static volatile double sink;

static void spin(long n) { double x = 0; for (long i = 0; i < n; i++) x += i * 0.5; sink = x; }

static void *worker(void *arg) {
    (void)arg;
    for (long i = 0; i < iters; i++) {
        spin(outside);
        pthread_mutex_lock(&lock);
        counter++;
        spin(inside);
        pthread_mutex_unlock(&lock);
    }
    report_schedstat();
    return NULL;
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 4;
    if (argc > 2) iters = atol(argv[2]);
    if (argc > 3) outside = atol(argv[3]);
    if (argc > 4) inside = atol(argv[4]);
    if (n < 1 || n > 256) { fprintf(stderr, "bad thread count\n"); return 2; }
    pthread_t t[256];
    for (long i = 0; i < n; i++) pthread_create(&t[i], NULL, worker, NULL);
    for (long i = 0; i < n; i++) pthread_join(t[i], NULL);
    if (counter != n * iters) { fprintf(stderr, "lost updates\n"); return 1; }
    return 0;
}
