/* Two alternating compute kernels per thread, for phase detection tests.
 *
 * Each of NTHREADS threads runs ROUNDS rounds of: fp_kernel (a floating-point loop) for MS
 * milliseconds of its CPU time, then hash_kernel (an integer hash loop) for MS milliseconds.
 * The kernels are separate non-inlined functions, so a sampler sees two distinct symbols.
 * Usage: two_kernels NTHREADS ROUNDS MS
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static int rounds = 4;
static long ms = 200;
static volatile double sink_d;
static volatile unsigned long sink_u;

static double cpu_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

__attribute__((noinline)) static double fp_kernel(double x, long iters)
{
    for (long i = 0; i < iters; i++)
        x = x * 1.0000001 + 0.5 / (x + 1.0);
    return x;
}

__attribute__((noinline)) static unsigned long hash_kernel(unsigned long h, long iters)
{
    for (long i = 0; i < iters; i++) {
        h ^= h >> 33;
        h *= 0xff51afd7ed558ccdUL;
        h ^= h >> 29;
        h += (unsigned long)i;
    }
    return h;
}

static void *worker(void *arg)
{
    double x = 1.0 + (long)arg;
    unsigned long h = 1469598103934665603UL + (long)arg;
    for (int r = 0; r < rounds; r++) {
        double t0 = cpu_ms();
        while (cpu_ms() - t0 < ms)
            x = fp_kernel(x, 200000);
        t0 = cpu_ms();
        while (cpu_ms() - t0 < ms)
            h = hash_kernel(h, 400000);
    }
    sink_d = x;
    sink_u = h;
    return NULL;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 2;
    if (argc > 2)
        rounds = atoi(argv[2]);
    if (argc > 3)
        ms = atol(argv[3]);
    pthread_t th[64];
    if (n < 1 || n > 64)
        return 2;
    for (long i = 0; i < n; i++)
        pthread_create(&th[i], NULL, worker, (void *)i);
    for (int i = 0; i < n; i++)
        pthread_join(th[i], NULL);
    printf("%f %lu\n", sink_d, sink_u);
    return 0;
}
