/* Server-style threads freeing each other's blocks, in the shape of larson: THREADS
 * threads each own a stretch of a shared array of slots for a round, replacing a
 * random slot's block by a fresh one of 16 to 1024 bytes at each step; after each
 * round the stretches move one thread on, so every free is of a block another
 * thread allocated. Usage: larson THREADS ROUNDS STEPS. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { SLOTS_PER_THREAD = 4096 };

static void **slots;
static int threads, rounds, steps;
static pthread_barrier_t barrier;

static uint64_t next(uint64_t *x) {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

static void *worker(void *arg) {
    int id = (int)(intptr_t)arg;
    uint64_t x = 0x9e3779b97f4a7c15u * (uint64_t)(id + 1);
    for (int r = 0; r < rounds; r++) {
        void **mine = slots + (size_t)((id + r) % threads) * SLOTS_PER_THREAD;
        for (int s = 0; s < steps; s++) {
            uint64_t v = next(&x);
            size_t k = v % SLOTS_PER_THREAD;
            size_t size = 16 + (v >> 32) % 1009;
            free(mine[k]);
            mine[k] = malloc(size);
            if (mine[k] == NULL) abort();
            memset(mine[k], (int)v, 8);
        }
        pthread_barrier_wait(&barrier);
    }
    return NULL;
}

int main(int argc, char **argv) {
    threads = argc > 1 ? atoi(argv[1]) : 4;
    rounds = argc > 2 ? atoi(argv[2]) : 20;
    steps = argc > 3 ? atoi(argv[3]) : 100000;
    slots = calloc((size_t)threads * SLOTS_PER_THREAD, sizeof *slots);
    pthread_barrier_init(&barrier, NULL, (unsigned)threads);
    pthread_t t[64];
    for (int i = 0; i < threads; i++) pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i);
    for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
    for (size_t i = 0; i < (size_t)threads * SLOTS_PER_THREAD; i++) free(slots[i]);
    free(slots);
    return 0;
}
