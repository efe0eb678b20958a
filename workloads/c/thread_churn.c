/* ROUNDS rounds of THREADS short threads: each spins WORK units, adding to a shared total under a
 * mutex every 5000, and exits; the main thread joins them and starts the next round. Every exit
 * leaves events the kernel writes after the thread's pid is unhashed (perf names their task -1).
 * Usage: thread_churn [ROUNDS=200] [THREADS=3] [WORK=200000] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static long total;

static void *worker(void *arg) {
    long n = (long)arg, s = 0;
    for (long i = 0; i < n; i++) {
        s += i * i % 7;
        if (i % 5000 == 0) {
            pthread_mutex_lock(&lock);
            total += s;
            pthread_mutex_unlock(&lock);
        }
    }
    return NULL;
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 200, threads = argc > 2 ? atoi(argv[2]) : 3;
    long work = argc > 3 ? atol(argv[3]) : 200000;
    if (rounds < 1 || threads < 1 || threads > 256 || work < 1) {
        fprintf(stderr, "usage: thread_churn [ROUNDS>=1] [THREADS 1-256] [WORK>=1]\n");
        return 2;
    }
    pthread_t t[256];
    for (int r = 0; r < rounds; r++) {
        for (int k = 0; k < threads; k++)
            pthread_create(&t[k], NULL, worker, (void *)(work + 50000L * k));
        for (int k = 0; k < threads; k++)
            pthread_join(t[k], NULL);
    }
    printf("%ld\n", total);
    return 0;
}
