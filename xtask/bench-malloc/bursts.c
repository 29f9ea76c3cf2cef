/* Bursts of short-lived threads, in the shape of alloc-test: BURSTS times, THREADS
 * threads start, each allocates BLOCKS blocks of 8 to 2048 bytes, frees every other
 * one, allocates again into the holes, frees everything and exits. Usage: bursts
 * THREADS BURSTS BLOCKS. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static int blocks;

static void *worker(void *arg) {
    uint64_t x = (uint64_t)(uintptr_t)arg * 0x9e3779b97f4a7c15u | 1;
    void **p = malloc(sizeof *p * (size_t)blocks);
    if (p == NULL) abort();
    /* All, then the odd ones freed and made again, then all freed. */
    for (int pass = 0; pass < 2; pass++) {
        for (int i = pass; i < blocks; i += 1 + pass) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            p[i] = malloc(8 + x % 2041);
            if (p[i] == NULL) abort();
            memset(p[i], 2, 8);
        }
        if (pass == 0)
            for (int i = 1; i < blocks; i += 2) free(p[i]);
    }
    for (int i = 0; i < blocks; i++) free(p[i]);
    free(p);
    return NULL;
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 4;
    int bursts = argc > 2 ? atoi(argv[2]) : 200;
    blocks = argc > 3 ? atoi(argv[3]) : 20000;
    pthread_t t[64];
    for (int b = 0; b < bursts; b++) {
        for (int i = 0; i < threads; i++)
            pthread_create(&t[i], NULL, worker, (void *)(intptr_t)(b * threads + i + 1));
        for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
    }
    return 0;
}
