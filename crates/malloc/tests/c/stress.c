/* Threads allocate blocks, fill them with a pattern of their own, pass them to each
 * other through shared slots, and check the pattern before freeing: run with
 * LD_PRELOAD=libbento_malloc.so. Usage: stress THREADS ROUNDS. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SLOTS 256

struct block {
    size_t size;
    unsigned char pattern;
    unsigned char bytes[];
};

static _Atomic(struct block *) slots[SLOTS];
static long rounds;
static atomic_long bad;

static uint64_t next(uint64_t *x) {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

static void check_free(struct block *b) {
    for (size_t i = 0; i < b->size; i += 1 + i / 8) {
        if (b->bytes[i] != b->pattern) {
            atomic_fetch_add(&bad, 1);
            break;
        }
    }
    free(b);
}

static void *worker(void *arg) {
    uint64_t x = 0x9e3779b97f4a7c15ull * ((uintptr_t)arg + 1);
    for (long r = 0; r < rounds; r++) {
        uint64_t v = next(&x);
        /* Mostly small, now and then up to 1 MiB. */
        size_t size = (v & 7) == 0 ? (size_t)(v >> 20) % (1 << 20) : (size_t)(v >> 20) % 600;
        struct block *b;
        if ((v >> 8) % 5 == 0) {
            void *q = NULL;
            if (posix_memalign(&q, 64, sizeof *b + size) != 0) {
                atomic_fetch_add(&bad, 1);
                continue;
            }
            b = q;
        } else {
            b = malloc(sizeof *b + size);
        }
        if (!b) {
            atomic_fetch_add(&bad, 1);
            continue;
        }
        b->size = size;
        b->pattern = (unsigned char)(v >> 40);
        memset(b->bytes, b->pattern, size);
        if ((v >> 12) % 7 == 0) { /* grow it, keeping the pattern */
            size_t more = size + (size_t)(v >> 50) % 4000;
            struct block *g = realloc(b, sizeof *b + more);
            if (!g) {
                atomic_fetch_add(&bad, 1);
                check_free(b);
                continue;
            }
            memset(g->bytes + g->size, g->pattern, more - g->size);
            g->size = more;
            b = g;
        }
        struct block *old = atomic_exchange(&slots[(v >> 30) % SLOTS], b);
        if (old) check_free(old);
    }
    return NULL;
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 4;
    rounds = argc > 2 ? atol(argv[2]) : 100000;
    pthread_t t[64];
    for (int i = 0; i < threads && i < 64; i++) pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)i);
    for (int i = 0; i < threads && i < 64; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < SLOTS; i++) {
        struct block *b = atomic_exchange(&slots[i], NULL);
        if (b) check_free(b);
    }
    if (bad) {
        fprintf(stderr, "stress: %ld blocks lost their pattern or failed\n", (long)bad);
        return 1;
    }
    printf("stress: ok\n");
    return 0;
}
