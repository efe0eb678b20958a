/* Memory kernel: sums a buffer much larger than the LLC in address order (default 128 MiB per
 * thread): it reuses nothing, so a pirate barely matters, but N copies share the DRAM bandwidth:
 * the memory component should dominate. STEPS = passes over the buffer, split among the threads. */
#include "eklov_kernel.h"

static uint64_t kernel(int id, uint64_t bytes, uint64_t steps) {
    uint64_t n = bytes / 8, *buf = big_alloc(n * 8), acc = (uint64_t)id;
    memset(buf, 1, n * 8);
    for (uint64_t pass = 0; pass < steps; pass++)
        for (uint64_t i = 0; i < n; i++) acc += buf[i];
    free(buf);
    return acc;
}

int main(int argc, char **argv) { return kernel_main(argc, argv, 128ULL << 20, 16ULL); }
