/* The bandwidth co-runner: streams through a buffer much larger than the LLC at a chosen rate.
 *
 * It reads one 8-byte word per 64-byte line in address order (every line comes from DRAM, the
 * prefetcher helps, so it takes bandwidth and little cache time), in chunks of 64 KiB; after each
 * chunk it sleeps if it is ahead of the target rate (--rate MB/s, 0 = as fast as it can).  It runs
 * until SIGTERM/SIGINT or --seconds, then prints "bytes ns" (what it moved, over how long) and exits.
 * It prints "ready" once its buffer is allocated and touched.
 *
 * Usage: streamer --size BYTES [--cpu CPU] [--rate MBPS] [--seconds S]
 */
#define _GNU_SOURCE
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>

#define LINE 64
#define CHUNK (64 * 1024)

static volatile sig_atomic_t stop;
static volatile uint64_t sink;

static void on_signal(int sig) { (void)sig; stop = 1; }

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv) {
    uint64_t size = 0;
    int cpu = -1;
    double rate = 0, seconds = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--size")) size = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--cpu")) cpu = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--rate")) rate = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--seconds")) seconds = atof(argv[i + 1]);
        else {
            fprintf(stderr, "streamer: unknown argument %s\n", argv[i]);
            return 2;
        }
    }
    if (size < CHUNK || rate < 0) {
        fprintf(stderr, "usage: streamer --size BYTES(>= 64 KiB) [--cpu CPU] [--rate MBPS] [--seconds S]\n");
        return 2;
    }
    size -= size % CHUNK;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    if (cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        sched_setaffinity(0, sizeof set, &set);
    }
    uint8_t *buf = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buf == MAP_FAILED) {
        perror("streamer: mmap");
        return 1;
    }
    memset(buf, 1, size);
    printf("ready\n");
    fflush(stdout);
    uint64_t moved = 0, off = 0, acc = 0;
    int64_t t0 = now_ns(), limit = seconds > 0 ? (int64_t)(seconds * 1e9) : INT64_MAX;
    while (!stop) {
        for (uint64_t i = 0; i < CHUNK; i += LINE) acc += *(volatile uint64_t *)(buf + off + i);
        moved += CHUNK;
        off = off + CHUNK >= size ? 0 : off + CHUNK;
        int64_t el = now_ns() - t0;
        if (el > limit) break;
        if (rate > 0) { /* ahead of schedule: sleep until the moved bytes match the rate */
            int64_t due = (int64_t)((double)moved / (rate * 1e6) * 1e9);
            if (due > el) {
                int64_t d = due - el;
                struct timespec ts = {d / 1000000000LL, d % 1000000000LL};
                nanosleep(&ts, NULL);
            }
        }
    }
    sink = acc;
    printf("%llu %lld\n", (unsigned long long)moved, (long long)(now_ns() - t0));
    return 0;
}
