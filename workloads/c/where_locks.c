/* Two named global mutexes and a heap-allocated one (record --stacks, docs/where.md).
 * Even-numbered threads call update_table, which holds big_lock for ~1 ms of arithmetic, and
 * bump_counter, which holds small_lock for a few instructions: big_lock is their bottleneck.
 * Odd-numbered threads call push_job, which holds the heap-allocated queue lock; with MODE
 * "big" every thread takes the update_table path, and big_lock serializes the whole run.
 * Usage: where_locks THREADS ROUNDS [MODE] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

pthread_mutex_t big_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_mutex_t small_lock = PTHREAD_MUTEX_INITIALIZER;
struct queue { pthread_mutex_t lock; long jobs[64]; long n; };
static struct queue *queue;
static volatile double table[64];
static volatile long counter;

__attribute__((noinline)) void update_table(long n) {
    pthread_mutex_lock(&big_lock);
    for (long i = 0; i < n; i++) table[i & 63] += (double)i * 0.5;
    pthread_mutex_unlock(&big_lock);
}

__attribute__((noinline)) void bump_counter(void) {
    pthread_mutex_lock(&small_lock);
    counter++;
    pthread_mutex_unlock(&small_lock);
}

__attribute__((noinline)) void push_job(long job) {
    pthread_mutex_lock(&queue->lock);
    for (volatile int i = 0; i < 300000; i++) queue->jobs[i & 63] = job;
    queue->n++;
    pthread_mutex_unlock(&queue->lock);
}

__attribute__((noinline)) void local_work(long n) {
    volatile double x = 0;
    for (long i = 0; i < n; i++) x += (double)i;
}

static long rounds;
static int all_big;

static void *worker(void *arg) {
    long id = (long)arg;
    for (long r = 0; r < rounds; r++) {
        if (all_big || id % 2 == 0) {
            update_table(1000000);
            bump_counter();
        } else {
            push_job(id * rounds + r);
        }
        local_work(20000);
    }
    return NULL;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 3;
    rounds = argc > 2 ? atol(argv[2]) : 200;
    all_big = argc > 3 && argv[3][0] == 'b';
    queue = calloc(1, sizeof *queue);
    pthread_mutex_init(&queue->lock, NULL);
    pthread_t t[64];
    for (long i = 0; i < n; i++) pthread_create(&t[i], NULL, worker, (void *)i);
    for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
    printf("%ld %ld\n", counter, queue->n);
    return 0;
}
