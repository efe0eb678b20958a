/* One producer and CONSUMERS consumers share a bounded queue (mutex + two condition
 * variables).  Usage: prodcons [ITEMS=100000] [CONSUMERS=2] [WORK=2000] */
#include "schedstat.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define CAP 64
static long queue[CAP], head, tail, count, items = 100000, work = 2000;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t not_empty = PTHREAD_COND_INITIALIZER, not_full = PTHREAD_COND_INITIALIZER;
static volatile double sink;

static void spin(long n) { double x = 0; for (long i = 0; i < n; i++) x += i * 0.5; sink = x; }

static void *producer(void *arg) {
    long consumers = (long)arg;
    for (long i = 0; i < items + consumers; i++) {
        spin(work / 4);
        pthread_mutex_lock(&lock);
        while (count == CAP) pthread_cond_wait(&not_full, &lock);
        queue[tail] = i < items ? i : -1;  /* -1 tells a consumer to stop */
        tail = (tail + 1) % CAP; count++;
        pthread_cond_signal(&not_empty);
        pthread_mutex_unlock(&lock);
    }
    report_schedstat();
    return NULL;
}

static void *consumer(void *arg) {
    (void)arg;
    for (;;) {
        pthread_mutex_lock(&lock);
        while (count == 0) pthread_cond_wait(&not_empty, &lock);
        long v = queue[head]; head = (head + 1) % CAP; count--;
        pthread_cond_signal(&not_full);
        pthread_mutex_unlock(&lock);
        if (v < 0) { report_schedstat(); return NULL; }
        spin(work);
    }
}

int main(int argc, char **argv) {
    if (argc > 1) items = atol(argv[1]);
    long consumers = argc > 2 ? atol(argv[2]) : 2;
    if (argc > 3) work = atol(argv[3]);
    if (consumers < 1 || consumers > 64) { fprintf(stderr, "bad consumer count\n"); return 2; }
    pthread_t p, c[64];
    pthread_create(&p, NULL, producer, (void *)consumers);
    for (long i = 0; i < consumers; i++) pthread_create(&c[i], NULL, consumer, NULL);
    pthread_join(p, NULL);
    for (long i = 0; i < consumers; i++) pthread_join(c[i], NULL);
    return 0;
}
