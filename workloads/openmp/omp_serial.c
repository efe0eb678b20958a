/* An OpenMP program with serial parts between its parallel loops (issue 27): the master thread
 * participates in every loop and runs the serial parts alone, as in most OpenMP codes.
 * usage: omp_serial [ROUNDS=20] [PARALLEL_UNITS=450] [SERIAL_UNITS=30]   (threads: OMP_NUM_THREADS)
 * Each round: SERIAL_UNITS of work on the master alone, then PARALLEL_UNITS shared by the team
 * (schedule(static)). A unit is ~50 us of arithmetic without memory traffic. On stderr it reports
 * its own measure of the serial parts: "serial_s S wall_s W threads N" (omp_get_wtime; appended to the
 * file SERIAL_OUT names too, when set), so the
 * SEQ component can be checked against the program's own clock. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

static volatile double sink;

static void unit(void) {
    double x = 1.0;
    for (int i = 0; i < 40000; i++) x = x * 1.0000001 + 1e-9;
    sink = x;
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 20;
    int par = argc > 2 ? atoi(argv[2]) : 450;
    int ser = argc > 3 ? atoi(argv[3]) : 30;
    double t0 = omp_get_wtime(), serial = 0;
    int threads = 1;
    for (int r = 0; r < rounds; r++) {
        double s0 = omp_get_wtime();
        for (int u = 0; u < ser; u++) unit();
        serial += omp_get_wtime() - s0;
#pragma omp parallel
        {
#pragma omp single nowait
            threads = omp_get_num_threads();
#pragma omp for schedule(static)
            for (int u = 0; u < par; u++) unit();
        }
    }
    double wall = omp_get_wtime() - t0;
    fprintf(stderr, "serial_s %.6f wall_s %.6f threads %d\n", serial, wall, threads);
    const char *out = getenv("SERIAL_OUT");
    FILE *f = out ? fopen(out, "a") : NULL;
    if (f) {
        fprintf(f, "serial_s %.6f wall_s %.6f threads %d\n", serial, wall, threads);
        fclose(f);
    }
    return 0;
}
