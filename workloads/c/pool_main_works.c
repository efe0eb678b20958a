/* A thread pool whose main thread works (issue 27): like a Rust rayon or Go program whose caller
 * joins the pool, the main thread takes its share of every parallel loop and runs the serial parts
 * alone while the N-1 pool threads wait on a pthread barrier (a futex: no spinning).
 * usage: pool_main_works THREADS [ROUNDS=20] [PARALLEL_UNITS=450] [SERIAL_UNITS=30]
 * A unit is ~50 us of arithmetic. On stderr: "serial_s S wall_s W threads N" (CLOCK_MONOTONIC),
 * appended to the file SERIAL_OUT names too, when set. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static volatile double sink;
static pthread_barrier_t start_bar, end_bar;
static int nthreads, rounds, par;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void unit(void) {
    double x = 1.0;
    for (int i = 0; i < 40000; i++) x = x * 1.0000001 + 1e-9;
    sink = x;
}

static void share(long id) {
    for (int u = id; u < par; u += nthreads) unit();
}

static void *pool(void *arg) {
    long id = (long)arg;
    for (int r = 0; r < rounds; r++) {
        pthread_barrier_wait(&start_bar);
        share(id);
        pthread_barrier_wait(&end_bar);
    }
    return NULL;
}

int main(int argc, char **argv) {
    nthreads = argc > 1 ? atoi(argv[1]) : 2;
    rounds = argc > 2 ? atoi(argv[2]) : 20;
    par = argc > 3 ? atoi(argv[3]) : 450;
    int ser = argc > 4 ? atoi(argv[4]) : 30;
    if (nthreads < 1 || nthreads > 256) {
        fprintf(stderr, "pool_main_works: THREADS must be 1..256\n");
        return 2;
    }
    pthread_t t[256];
    double t0 = now(), serial = 0;
    if (nthreads > 1) {
        pthread_barrier_init(&start_bar, NULL, nthreads);
        pthread_barrier_init(&end_bar, NULL, nthreads);
        for (long i = 1; i < nthreads; i++) pthread_create(&t[i], NULL, pool, (void *)i);
    }
    for (int r = 0; r < rounds; r++) {
        double s0 = now();
        for (int u = 0; u < ser; u++) unit();
        serial += now() - s0;
        if (nthreads > 1) pthread_barrier_wait(&start_bar);
        share(0);
        if (nthreads > 1) pthread_barrier_wait(&end_bar);
    }
    for (long i = 1; i < nthreads; i++) pthread_join(t[i], NULL);
    double wall = now() - t0;
    fprintf(stderr, "serial_s %.6f wall_s %.6f threads %d\n", serial, wall, nthreads);
    const char *out = getenv("SERIAL_OUT");
    FILE *f = out ? fopen(out, "a") : NULL;
    if (f) {
        fprintf(f, "serial_s %.6f wall_s %.6f threads %d\n", serial, wall, nthreads);
        fclose(f);
    }
    return 0;
}
