/* The cache pirate: holds W bytes of the last-level cache by touching them again and again.
 *
 * It touches one word per 64-byte line, in a random cyclic order (a pointer chase over a random
 * permutation, Sattolo's algorithm), so the hardware prefetcher cannot fetch ahead and the time per
 * line is the cache-hit latency while the set is resident and rises toward DRAM latency when the
 * co-runner evicts it: that rise is the self-check the spec (section 3) asks for without counters.
 * CHAINS independent chases run interleaved so the pirate touches its lines often enough to keep
 * them (a single chase is bound by one miss at a time).  `--pattern stride` walks the lines in
 * address order instead (measured in docs/pirate.md).
 *
 * Usage: pirate --size BYTES --cpu CPU --ctl PATH [--mode lockstep|free] [--pattern random|stride]
 *        pirate --size BYTES --cpu CPU --calibrate       (prints ns per line, alone, and exits)
 *        pirate --sizes B1,B2,... --cpu CPU --ctl PATH   (lockstep, up to 8 sizes, one at a time)
 * The control page protocol is pirate_ctl.h's; in free mode the pirate runs from the moment it is
 * ready until SS_QUIT and keeps seg_lines / seg_ns as running totals since it started running.
 *
 * Several sizes (the stand-alone mode's single run with W varying over time, spec section 2.3):
 * size k's cycle runs over the first size_k / 64 lines of one buffer and keeps its next-line
 * indices in word k of each line, so the sets are nested, a change of size needs no allocation,
 * and each size has its own self-check reference.  The driver writes active_bytes before SS_WARM.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "pirate_ctl.h"

#define LINE 64
#define MAXSIZES (LINE / 8) /* one next-line word per size in each line */
#define CHAINS 4
#define CHUNK 256 /* lines between two looks at the command word */
#define LOAD(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)

static struct ss_pirate_ctl *ctl;
static uint64_t *buf;       /* lines; word k of each line holds the next line of size k's cycle */
static uint64_t nlines;     /* lines of the active size */
static uint64_t pos[CHAINS];
static int word;            /* the active size's index: its cycle's word in each line */
static int stride;
static int nsizes = 1;
static uint64_t size_lines[MAXSIZES];
static uint64_t buf_lines;  /* lines in the buffer: the largest size's */
static uint64_t size_pos[MAXSIZES][CHAINS];
static volatile uint64_t sink;

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* The pirate's own CPU time: a segment's ns exclude the time it was descheduled (two CPUs shared with
 * other jobs), so a rise in ns per line means lost lines, not a lost CPU. */
static int64_t cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void wake(uint32_t *addr) { syscall(SYS_futex, addr, FUTEX_WAKE, 0x7fffffff, NULL, NULL, 0); }

static void set_state(uint32_t s) {
    STORE(&ctl->state, s);
    wake(&ctl->state);
}

static void wait_change(uint32_t seen) {
    struct timespec ts = {0, 50 * 1000000};
    syscall(SYS_futex, &ctl->command, FUTEX_WAIT, seen, &ts, NULL, 0);
}

static void die(const char *what) {
    fprintf(stderr, "pirate: %s: %s\n", what, strerror(errno));
    exit(1);
}

/* The lines a working set of `bytes` has: at least one per chase. */
static uint64_t lines_of(uint64_t bytes) { return bytes / LINE < CHAINS ? CHAINS : bytes / LINE; }

static void setup(const uint64_t *bytes, int random_order) {
    for (int k = 0; k < nsizes; k++) {
        size_lines[k] = lines_of(bytes[k]);
        if (size_lines[k] > buf_lines) buf_lines = size_lines[k];
    }
    size_t len = buf_lines * LINE;
    buf = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buf == MAP_FAILED) die("mmap");
    madvise(buf, len, MADV_HUGEPAGE); /* fewer TLB misses: the time per line is the cache's */
    uint64_t *perm = malloc(buf_lines * sizeof *perm);
    if (!perm) die("malloc");
    uint64_t s = 0x9e3779b97f4a7c15ULL ^ (uint64_t)now_ns();
    for (int k = 0; k < nsizes; k++) {
        uint64_t n = size_lines[k];
        for (uint64_t i = 0; i < n; i++) perm[i] = i;
        if (random_order) { /* Sattolo: a random permutation that is one cycle through every line */
            for (uint64_t i = n - 1; i > 0; i--) {
                s ^= s << 13; s ^= s >> 7; s ^= s << 17;
                uint64_t j = s % i, t = perm[i];
                perm[i] = perm[j];
                perm[j] = t;
            }
        }
        /* line perm[i] points to line perm[i+1]: one cycle; chain c starts a quarter of the way further */
        for (uint64_t i = 0; i < n; i++) buf[perm[i] * (LINE / 8) + k] = perm[(i + 1) % n];
        for (int c = 0; c < CHAINS; c++) size_pos[k][c] = perm[(n / CHAINS) * c];
    }
    free(perm);
    word = 0;
    nlines = size_lines[0];
    memcpy(pos, size_pos[0], sizeof pos);
}

/* Make size k the one touched: its line count, its cycle's word and where its chases stopped. */
static void activate(int k) {
    memcpy(size_pos[word], pos, sizeof pos);
    word = k;
    nlines = size_lines[k];
    memcpy(pos, size_pos[k], sizeof pos);
}

/* Touch `n` lines (n a multiple of CHAINS), CHAINS chases in flight. */
static void touch(uint64_t n) {
    uint64_t p0 = pos[0], p1 = pos[1], p2 = pos[2], p3 = pos[3];
    const uint64_t w = LINE / 8;
    if (stride) {
        for (uint64_t i = 0; i < n; i += CHAINS) {
            p0 = p0 + 1 == nlines ? 0 : p0 + 1;
            p1 = p1 + 1 == nlines ? 0 : p1 + 1;
            p2 = p2 + 1 == nlines ? 0 : p2 + 1;
            p3 = p3 + 1 == nlines ? 0 : p3 + 1;
            sink += buf[p0 * w] + buf[p1 * w] + buf[p2 * w] + buf[p3 * w];
        }
    } else {
        const uint64_t *b = buf + word;
        for (uint64_t i = 0; i < n; i += CHAINS) {
            p0 = b[p0 * w];
            p1 = b[p1 * w];
            p2 = b[p2 * w];
            p3 = b[p3 * w];
        }
    }
    pos[0] = p0; pos[1] = p1; pos[2] = p2; pos[3] = p3;
}

/* Every line touched at least twice (each chain walks the whole cycle twice over its quarter);
 * returns the ns per line of the second pass, when the set is resident. */
static double warm(void) {
    uint64_t pass = (nlines + CHAINS) / CHAINS * CHAINS + CHAINS;
    touch(pass);
    int64_t t0 = cpu_ns();
    touch(pass);
    return (double)(cpu_ns() - t0) / (double)pass;
}

/* The reference of the self-check, kept current: the median of the calibration and of the second
 * warm-up pass of the last few segments, each taken while the profiled thread is parked.  The
 * machine's other tenants change what "a cache hit" costs over minutes; a reference from one
 * moment at start-up would flag (or pass) whole runs.  Kept per size; the active size's is published
 * in calib_ns_per_line. */
#define NREF 9
static double refs[MAXSIZES][NREF];
static int nref[MAXSIZES];

static int cmp_double(const void *a, const void *b);

static void add_reference(double v) {
    refs[word][nref[word] % NREF] = v;
    nref[word]++;
}

static void publish_reference(void) {
    int k = nref[word] < NREF ? nref[word] : NREF;
    double tmp[NREF];
    memcpy(tmp, refs[word], k * sizeof tmp[0]);
    qsort(tmp, k, sizeof tmp[0], cmp_double);
    double med = tmp[(k - 1) / 2]; /* the lower median: one slow warm-up pass cannot loosen the check */
    uint64_t bits;
    memcpy(&bits, &med, sizeof bits);
    __atomic_store_n((uint64_t *)&ctl->calib_ns_per_line, bits, __ATOMIC_RELEASE);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The lower quartile of at least 15 passes (or 200 ms), set resident: not the single best pass (too
 * strict on a machine other tenants share) nor the median (a disturbed calibration would hide a
 * pirate that later loses its lines). */
static double calibrate(void) {
    double v[100];
    int k = 0;
    warm();
    int64_t start = now_ns();
    while (k < 100 && (k < 15 || now_ns() - start < 200000000LL) && (k < 3 || now_ns() - start < 2000000000LL)) {
        uint64_t n = nlines < 65536 ? 65536 : (nlines + CHAINS - 1) / CHAINS * CHAINS;
        int64_t t0 = cpu_ns();
        touch(n);
        v[k++] = (double)(cpu_ns() - t0) / (double)n;
    }
    qsort(v, k, sizeof v[0], cmp_double);
    return v[k / 4];
}

/* The size the driver asked for (0: the first); an unknown size is the driver's error. */
static void select_size(uint64_t bytes) {
    int k = 0;
    if (bytes) {
        for (k = 0; k < nsizes && size_lines[k] != lines_of(bytes); k++) {}
        if (k == nsizes) {
            fprintf(stderr, "pirate: no working set of %llu bytes (not one of --sizes)\n", (unsigned long long)bytes);
            exit(2);
        }
    }
    if (k != word) {
        activate(k);
        publish_reference();
    }
}

static void run_lockstep(void) {
    uint32_t cmd = SS_PARK;
    for (;;) {
        cmd = LOAD(&ctl->command);
        switch (cmd) {
        case SS_QUIT:
            set_state(SS_QUITTING);
            return;
        case SS_WARM:
            if (LOAD(&ctl->state) != SS_WARMED) {
                select_size(LOAD(&ctl->active_bytes));
                add_reference(warm());
                publish_reference();
                STORE(&ctl->seg_lines, 0); /* a segment too short to see SS_RUN parks with zeros, */
                STORE(&ctl->seg_ns, 0);    /* not with the previous segment's counts */
                set_state(SS_WARMED);
            }
            touch(CHUNK); /* keep it warm until told to run */
            break;
        case SS_RUN: {
            uint64_t lines = 0;
            int64_t t0 = cpu_ns();
            set_state(SS_RUNNING);
            while (LOAD(&ctl->command) == SS_RUN) {
                touch(CHUNK);
                lines += CHUNK;
            }
            int64_t ns = cpu_ns() - t0;
            STORE(&ctl->seg_lines, lines);
            STORE(&ctl->seg_ns, (uint64_t)ns);
            break; /* the next turn of the loop sees the new command (SS_PARK) and answers it */
        }
        default: /* SS_PARK, or the zero of a fresh page */
            if (LOAD(&ctl->state) != SS_PARKED) set_state(SS_PARKED);
            wait_change(cmd);
        }
    }
}

static void run_free(void) {
    uint64_t lines = 0;
    int64_t t0 = cpu_ns();
    set_state(SS_RUNNING);
    while (LOAD(&ctl->command) != SS_QUIT) {
        for (int i = 0; i < 64; i++) touch(CHUNK);
        lines += 64 * CHUNK;
        STORE(&ctl->seg_ns, (uint64_t)(cpu_ns() - t0));
        STORE(&ctl->seg_lines, lines);
    }
    set_state(SS_QUITTING);
}

int main(int argc, char **argv) {
    uint64_t sizes[MAXSIZES] = {0};
    int cpu = -1, free_mode = 0, calib_only = 0, random_order = 1;
    const char *ctl_path = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--size") && v) sizes[0] = strtoull(v, NULL, 10), nsizes = 1, i++;
        else if (!strcmp(a, "--sizes") && v) {
            char *end = (char *)v;
            for (nsizes = 0; *end && nsizes < MAXSIZES; nsizes++) {
                sizes[nsizes] = strtoull(end, &end, 10);
                if (*end == ',') end++;
            }
            if (*end) {
                fprintf(stderr, "pirate: at most %d sizes\n", MAXSIZES);
                return 2;
            }
            i++;
        }
        else if (!strcmp(a, "--cpu") && v) cpu = atoi(v), i++;
        else if (!strcmp(a, "--ctl") && v) ctl_path = v, i++;
        else if (!strcmp(a, "--mode") && v) free_mode = !strcmp(v, "free"), i++;
        else if (!strcmp(a, "--pattern") && v) random_order = strcmp(v, "stride") != 0, i++;
        else if (!strcmp(a, "--calibrate")) calib_only = 1;
        else {
            fprintf(stderr, "pirate: unknown argument %s\n", a);
            return 2;
        }
    }
    int too_small = nsizes < 1;
    for (int k = 0; k < nsizes; k++) too_small |= sizes[k] < LINE;
    if (too_small || (!ctl_path && !calib_only) || (nsizes > 1 && (calib_only || free_mode))) {
        fprintf(stderr, "usage: pirate (--size BYTES | --sizes B1,B2,... with --ctl, lockstep) --cpu CPU "
                        "(--ctl PATH [--mode lockstep|free] | --calibrate)\n");
        return 2;
    }
    stride = !random_order;
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive the driver */
    if (cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        if (sched_setaffinity(0, sizeof set, &set) != 0) die("sched_setaffinity");
    }
    setup(sizes, random_order);
    for (int k = nsizes - 1; k >= 0; k--) { /* ends on size 0, the one a single-size pirate has */
        activate(k);
        add_reference(calibrate());
    }
    if (calib_only) {
        printf("%.4f\n", refs[0][0]);
        return 0;
    }
    int fd = open(ctl_path, O_RDWR);
    if (fd < 0) die(ctl_path);
    ctl = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (ctl == MAP_FAILED) die("mmap control page");
    close(fd);
    ctl->version = SS_PIRATE_VERSION;
    ctl->pirate_pid = (uint32_t)getpid();
    ctl->working_set_bytes = buf_lines * LINE;
    publish_reference();
    STORE(&ctl->seg_lines, 0);
    STORE(&ctl->seg_ns, 0);
    if (free_mode) {
        warm();
        STORE(&ctl->magic, SS_PIRATE_MAGIC);
        run_free();
    } else {
        set_state(SS_PARKED);
        STORE(&ctl->magic, SS_PIRATE_MAGIC); /* last: the page is complete once magic is there */
        wake(&ctl->magic);
        run_lockstep();
    }
    return (int)(sink & 0); /* keep the stride loads */
}
