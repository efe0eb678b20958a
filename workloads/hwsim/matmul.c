/* Naive C matrix multiply: a small real program traced by hwsim's tests and benchmarks. */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 96;
    double *a = malloc(sizeof(double) * n * n), *b = malloc(sizeof(double) * n * n), *c = calloc(n * n, sizeof(double));
    for (int i = 0; i < n * n; i++) { a[i] = i % 7; b[i] = i % 5; }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            double s = 0;
            for (int k = 0; k < n; k++) s += a[i * n + k] * b[k * n + j];
            c[i * n + j] = s;
        }
    printf("%f\n", c[n * n - 1]);
    return 0;
}
