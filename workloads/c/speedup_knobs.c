/* Strong-scaling workload with two knobs for speedup stacks.
 * usage: speedup_knobs THREADS SERIAL_UNITS PARALLEL_UNITS LOCK_PCT
 * Main does SERIAL_UNITS of work alone, then THREADS workers share PARALLEL_UNITS;
 * LOCK_PCT percent of each unit is done holding one global mutex. */
#include <pthread.h>
#include <stdlib.h>
#include <stdio.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static long units_per_thread, lock_pct;
static volatile double sink;

static void spin(long n) { double x = 0; for (long i = 0; i < n; i++) x += i * 0.5; sink = x; }

static void *worker(void *arg) {
    (void)arg;
    for (long u = 0; u < units_per_thread; u++) {
        spin((100 - lock_pct) * 1000);
        pthread_mutex_lock(&lock);
        spin(lock_pct * 1000);
        pthread_mutex_unlock(&lock);
    }
    return NULL;
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 2;
    long serial = argc > 2 ? atol(argv[2]) : 100;
    long parallel = argc > 3 ? atol(argv[3]) : 2000;
    lock_pct = argc > 4 ? atol(argv[4]) : 0;
    units_per_thread = parallel / n;
    spin(serial * 100000);
    pthread_t t[256];
    for (long i = 0; i < n; i++) pthread_create(&t[i], NULL, worker, NULL);
    for (long i = 0; i < n; i++) pthread_join(t[i], NULL);
    return 0;
}
