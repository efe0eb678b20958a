/* Cache kernel: a random pointer chase over a working set sized to fit the LLC alone but not a 1/N
 * share of it (the test passes BYTES from the detected LLC; default 24 MiB = 3/4 of a 32 MiB L3),
 * so giving each thread C/N of the cache turns hits into misses: a clearly positive cache component. */
#include "eklov_kernel.h"

static uint64_t kernel(int id, uint64_t bytes, uint64_t steps) {
    uint64_t nlines = bytes / 64, *buf = big_alloc(nlines * 64), p = 0;
    chain_lines(buf, nlines, (uint64_t)id + 1);
    for (uint64_t i = 0; i < nlines; i++) p = buf[p * 8]; /* one pass to bring the set in */
    for (uint64_t i = 0; i < steps; i++) p = buf[p * 8];
    free(buf);
    return p;
}

int main(int argc, char **argv) { return kernel_main(argc, argv, 24ULL << 20, 20000000ULL); }
