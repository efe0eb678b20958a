/* THREADS threads each do the same work between ROUNDS barriers: a balanced program whose
 * criticality stack should be even.  Usage: balanced [THREADS=2] [ROUNDS=10] [WORK=3000000] */
#include "schedstat.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static pthread_barrier_t barrier;
static long rounds = 10, work = 3000000;
static volatile double sink;

static void *worker(void *arg) {
    (void)arg;
    for (long r = 0; r < rounds; r++) {
        double x = 0;
        for (long i = 0; i < work; i++) x += (double)(i & 1023) * 0.5;
        sink = x;
        pthread_barrier_wait(&barrier);
    }
    report_schedstat();
    return NULL;
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 2;
    if (argc > 2) rounds = atol(argv[2]);
    if (argc > 3) work = atol(argv[3]);
    if (n < 1 || n > 256) { fprintf(stderr, "bad thread count\n"); return 2; }
    pthread_t t[256];
    pthread_barrier_init(&barrier, NULL, (unsigned)n);
    for (long i = 0; i < n; i++) pthread_create(&t[i], NULL, worker, NULL);
    for (long i = 0; i < n; i++) pthread_join(t[i], NULL);
    return 0;
}
