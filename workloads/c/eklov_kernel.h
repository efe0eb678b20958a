/* Shared by the eklov_* cache/memory kernels: N threads, each with its own working set of BYTES
 * (so each thread wants the cache a single one had: a share C/N may not hold it) and STEPS/N of the
 * fixed total work (strong scaling: T(1)/T(N) is the speedup), no synchronization among them (so
 * T_nosync = T_meas and the stack has only the cache and memory components).
 * Usage: KERNEL THREADS [BYTES] [STEPS]; prints the run's time. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sys/mman.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t bytes_per_thread, steps_per_thread;
static volatile uint64_t sink;

static uint64_t kernel(int id, uint64_t bytes, uint64_t steps); /* each file defines it */

static void *worker(void *arg) {
    sink += kernel((int)(intptr_t)arg, bytes_per_thread, steps_per_thread);
    return NULL;
}

/* Working sets on 2 MiB pages where the kernel allows it: on a VM a TLB miss costs a nested page
 * walk, which would swamp the cache effect these kernels are for. */
static void *big_alloc(uint64_t bytes) {
    void *p = NULL;
    if (posix_memalign(&p, 2u << 20, bytes) != 0) return NULL;
    madvise(p, bytes, MADV_HUGEPAGE);
    return p;
}

/* A random cyclic permutation over the lines of `buf` (Sattolo), so a chase defeats the prefetcher. */
__attribute__((unused)) static void chain_lines(uint64_t *buf, uint64_t nlines, uint64_t seed) {
    uint64_t *perm = malloc(nlines * sizeof *perm), s = seed * 0x9e3779b97f4a7c15ULL + 1;
    for (uint64_t i = 0; i < nlines; i++) perm[i] = i;
    for (uint64_t i = nlines - 1; i > 0; i--) {
        s ^= s << 13; s ^= s >> 7; s ^= s << 17;
        uint64_t j = s % i, t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    for (uint64_t k = 0; k < nlines; k++) buf[perm[k] * 8] = perm[(k + 1) % nlines];
    free(perm);
}

static int kernel_main(int argc, char **argv, uint64_t default_bytes, uint64_t default_steps) {
    int n = argc > 1 ? atoi(argv[1]) : 1;
    bytes_per_thread = argc > 2 ? strtoull(argv[2], NULL, 10) : default_bytes;
    uint64_t steps = argc > 3 ? strtoull(argv[3], NULL, 10) : default_steps;
    if (n < 1 || n > 1024 || bytes_per_thread < 4096 || steps < (uint64_t)n) {
        fprintf(stderr, "usage: %s THREADS [BYTES>=4096] [STEPS>=THREADS]\n", argv[0]);
        return 2;
    }
    steps_per_thread = steps / (uint64_t)n;
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    pthread_t *t = calloc(n, sizeof *t);
    for (int i = 0; i < n; i++) pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i);
    for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
    clock_gettime(CLOCK_MONOTONIC, &b);
    printf("threads=%d bytes=%llu steps=%llu elapsed_ns=%lld\n", n, (unsigned long long)bytes_per_thread,
           (unsigned long long)steps,
           (long long)((b.tv_sec - a.tv_sec) * 1000000000LL + (b.tv_nsec - a.tv_nsec)));
    free(t);
    return 0;
}
