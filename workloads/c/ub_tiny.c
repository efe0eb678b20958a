/* ub-tiny: compute on a working set that fits in L1 (4 KiB per thread), so only synchronization
 * limits its speedup.  See ub_common.h for the structure and arguments. */
#define UB_WS_MB 0
#define UB_ITERS 400
#define UB_CS 1200
#include "ub_common.h"

static void compute(struct part *p, long n) {
    uint64_t acc = p->acc;
    size_t mask = 511;  /* 4 KiB of the thread's part */
    for (long i = 0; i < n; i++) {
        acc += p->base[(p->pos + i * 7) & mask] ^ (acc >> 3);
        acc *= 0x9E3779B97F4A7C15ULL;
    }
    p->pos += n;
    p->acc = acc;
}
