/* Control kernel: the same random pointer chase as eklov_fit_llc over 16 KiB, which fits the L1 data
 * cache: neither a pirate nor a co-runner should slow it (cache and memory components ~0). */
#include "eklov_kernel.h"

static uint64_t kernel(int id, uint64_t bytes, uint64_t steps) {
    uint64_t nlines = bytes / 64, *buf = big_alloc(nlines * 64), p = 0;
    chain_lines(buf, nlines, (uint64_t)id + 1);
    for (uint64_t i = 0; i < steps; i++) p = buf[p * 8];
    free(buf);
    return p;
}

int main(int argc, char **argv) { return kernel_main(argc, argv, 16ULL << 10, 200000000ULL); }
