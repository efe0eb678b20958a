/* The Eklov et al. microbenchmark skeleton (their Listing 1): every thread computes, takes one
 * lock for a short critical section, and meets the others at a barrier after each round.  The
 * threads work on disjoint parts of the working set, so the program is also correct with the
 * synchronization compiled out (-DNOSYNC), which gives the reference for the no-sync estimate.
 * The work is fixed: PER_ROUND compute calls per round are split among the threads, and so is the
 * working set.  The critical section touches only the thread's own data (a shared variable written
 * in it would make the -DNOSYNC build slower through coherence misses, not the same program minus
 * its synchronization).  Each ub_*.c defines `compute` (its memory behaviour) and includes this file.
 * Usage: ub_X THREADS [ROUNDS=20] [PER_ROUND=4000] [ITERS] [WS_MB] [CS] (defaults per ub: UB_*).
 * The defaults make the lock contended (the critical section is CS LCG steps) and a run at one
 * thread take about 0.2 s here.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <unistd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(NOSYNC) && defined(BOUNCE)
/* Diagnosis builds (benchmarks/eklov_nosync_gap.py): no waiting, but each LOCK still moves one
 * shared cache line between the cores (BOUNCE) or executes a locked instruction on the thread's own
 * line (FENCE), as an uncontended lock does. */
static uint64_t bounce_word __attribute__((aligned(64)));
#define LOCK() ((void)__atomic_exchange_n(&bounce_word, 1, __ATOMIC_ACQUIRE))
#define UNLOCK() __atomic_store_n(&bounce_word, 0, __ATOMIC_RELEASE)
#define BARRIER() ((void)0)
#elif defined(NOSYNC) && defined(FENCE)
#define LOCK() ((void)__atomic_exchange_n(&p->fence_word, 1, __ATOMIC_ACQUIRE))
#define UNLOCK() __atomic_store_n(&p->fence_word, 0, __ATOMIC_RELEASE)
#define BARRIER() ((void)0)
#elif defined(NOSYNC)
#define LOCK() ((void)0)
#define UNLOCK() ((void)0)
#define BARRIER() ((void)0)
#else
#define LOCK() pthread_mutex_lock(&mutex)
#define UNLOCK() pthread_mutex_unlock(&mutex)
#define BARRIER() pthread_barrier_wait(&barrier)
#endif

struct part {
    uint64_t *base;     /* this thread's part of the working set */
    size_t words;
    size_t pos;
    uint64_t rng;
    uint64_t acc;
    long id;
    uint64_t fence_word;
    char pad[64];
};

static long nthreads = 2, rounds = 20, per_round = 4000, iters = UB_ITERS, ws_mb = UB_WS_MB, cs = UB_CS;
static pthread_mutex_t mutex __attribute__((unused)) = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t barrier;

static void compute(struct part *p, long n);

static void *worker(void *arg) {
    struct part *p = arg;
#ifdef PIN  /* diagnosis: thread i on CPU i (mod the CPUs), so no thread migrates when it wakes */
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(p->id % sysconf(_SC_NPROCESSORS_ONLN), &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
#endif
    long mine = per_round / nthreads;
    for (long r = 0; r < rounds; r++) {
        for (long j = 0; j < mine; j++) {
            compute(p, iters);
            LOCK();
            uint64_t x = p->acc;
            for (long c = 0; c < cs; c++) x = x * 6364136223846793005ULL + 1442695040888963407ULL;
            p->acc ^= x;
            UNLOCK();
        }
        BARRIER();
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc > 1) nthreads = atol(argv[1]);
    if (argc > 2) rounds = atol(argv[2]);
    if (argc > 3) per_round = atol(argv[3]);
    if (argc > 4) iters = atol(argv[4]);
    if (argc > 5) ws_mb = atol(argv[5]);
    if (argc > 6) cs = atol(argv[6]);
    if (nthreads < 1 || rounds < 1 || per_round < nthreads || ws_mb < 0) {
        fprintf(stderr, "usage: %s THREADS [ROUNDS] [PER_ROUND] [ITERS] [WS_MB] [CS]\n", argv[0]);
        return 2;
    }
    size_t total = ((size_t)ws_mb << 20) / sizeof(uint64_t);
    if (total < (size_t)nthreads * 512) total = (size_t)nthreads * 512;  /* 4 KiB per thread at least */
    uint64_t *ws = malloc(total * sizeof(uint64_t));
    struct part *parts = calloc(nthreads, sizeof *parts);
    pthread_t *tids = malloc(nthreads * sizeof *tids);
    if (!ws || !parts || !tids) return 1;
    for (size_t i = 0; i < total; i++) ws[i] = i * 2654435761u;
    pthread_barrier_init(&barrier, NULL, nthreads);
    size_t share = total / nthreads;
    for (long i = 0; i < nthreads; i++) {
        parts[i] = (struct part){.base = ws + i * share, .words = share, .rng = 88172645463325252ULL + i, .id = i};
        pthread_create(&tids[i], NULL, worker, &parts[i]);
    }
    uint64_t sum = 0;
    for (long i = 0; i < nthreads; i++) {
        pthread_join(tids[i], NULL);
        sum ^= parts[i].acc;
    }
    printf("checksum %llu\n", (unsigned long long)sum);
    free(ws);
    return 0;
}
