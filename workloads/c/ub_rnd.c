/* ub-rnd: random reads over the thread's part of a working set (32 MiB in all by default), so it
 * has some locality in a large cache and little bandwidth demand.  See ub_common.h. */
#define UB_WS_MB 32
#define UB_ITERS 60
#define UB_CS 1000
#include "ub_common.h"

static void compute(struct part *p, long n) {
    uint64_t acc = p->acc, x = p->rng;
    for (long i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        acc += p->base[x % p->words];
    }
    p->rng = x;
    p->acc = acc;
}
