/* Idle threads beside a contended lock (advice: idle waits are not contention).
 * IDLE threads park on a condition variable for the whole run, as a pool's workers do with no
 * tasks queued (node's V8 platform workers, a JVM's compiler threads); WORKERS threads meanwhile
 * take turns on one mutex, each holding it for ~1 ms of arithmetic ROUNDS times. The parked
 * threads wait longer in all than the workers do, but delay nothing: the mutex is the problem.
 * Usage: idle_pool WORKERS ROUNDS IDLE */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static pthread_mutex_t work_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pool_cond = PTHREAD_COND_INITIALIZER;
static int stop;
static volatile double sink;
static long rounds;

static void *idle_worker(void *arg) {
    (void)arg;
    pthread_mutex_lock(&pool_lock);
    while (!stop)
        pthread_cond_wait(&pool_cond, &pool_lock);
    pthread_mutex_unlock(&pool_lock);
    return NULL;
}

static void *worker(void *arg) {
    (void)arg;
    for (long r = 0; r < rounds; r++) {
        pthread_mutex_lock(&work_lock);
        double x = 1.0;
        for (long i = 0; i < 400000; i++)
            x = x * 1.0000001 + 1e-9;
        sink = x;
        pthread_mutex_unlock(&work_lock);
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s WORKERS ROUNDS IDLE\n", argv[0]);
        return 2;
    }
    int workers = atoi(argv[1]), idle = atoi(argv[3]);
    rounds = atol(argv[2]);
    pthread_t *t = calloc((size_t)(workers + idle), sizeof *t);
    for (int i = 0; i < idle; i++)
        pthread_create(&t[i], NULL, idle_worker, NULL);
    for (int i = 0; i < workers; i++)
        pthread_create(&t[idle + i], NULL, worker, NULL);
    for (int i = 0; i < workers; i++)
        pthread_join(t[idle + i], NULL);
    pthread_mutex_lock(&pool_lock);
    stop = 1;
    pthread_cond_broadcast(&pool_cond);
    pthread_mutex_unlock(&pool_lock);
    for (int i = 0; i < idle; i++)
        pthread_join(t[i], NULL);
    free(t);
    return 0;
}
