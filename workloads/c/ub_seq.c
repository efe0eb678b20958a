/* ub-seq: streams sequentially through the thread's part of a working set (256 MiB in all by
 * default, one read per cache line), so it never hits in the last-level cache and its speedup is
 * limited by memory bandwidth.  See ub_common.h. */
#define UB_WS_MB 128
#define UB_ITERS 400
#define UB_CS 1000
#include "ub_common.h"

static void compute(struct part *p, long n) {
    uint64_t acc = p->acc;
    size_t pos = p->pos;
    for (long i = 0; i < n; i++) {
        acc += p->base[pos];
        pos += 8;  /* next cache line */
        if (pos >= p->words) pos = (pos + 1) & 7;
    }
    p->pos = pos;
    p->acc = acc;
}
