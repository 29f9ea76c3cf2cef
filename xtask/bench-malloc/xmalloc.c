/* Producer and consumer threads, in the shape of xmalloc-test: PAIRS producers
 * allocate blocks of 16 to 512 bytes and pass them through a ring each to its
 * consumer, which frees them: every free is on another thread than the allocation.
 * Usage: xmalloc PAIRS BLOCKS (per producer). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { RING = 1024 };

struct ring {
    _Atomic size_t head; /* written by the producer */
    char pad[56];
    _Atomic size_t tail; /* written by the consumer */
    char pad2[56];
    void *slot[RING];
};

static long blocks;

static void *produce(void *arg) {
    struct ring *r = arg;
    uint64_t x = (uint64_t)(uintptr_t)arg | 1;
    for (long i = 0; i < blocks; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        void *p = malloc(16 + x % 497);
        if (p == NULL) abort();
        memset(p, 1, 16);
        size_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
        while (h - atomic_load_explicit(&r->tail, memory_order_acquire) == RING) {
        }
        r->slot[h % RING] = p;
        atomic_store_explicit(&r->head, h + 1, memory_order_release);
    }
    return NULL;
}

static void *consume(void *arg) {
    struct ring *r = arg;
    for (long i = 0; i < blocks; i++) {
        size_t t = atomic_load_explicit(&r->tail, memory_order_relaxed);
        while (atomic_load_explicit(&r->head, memory_order_acquire) == t) {
        }
        free(r->slot[t % RING]);
        atomic_store_explicit(&r->tail, t + 1, memory_order_release);
    }
    return NULL;
}

int main(int argc, char **argv) {
    int pairs = argc > 1 ? atoi(argv[1]) : 2;
    blocks = argc > 2 ? atol(argv[2]) : 2000000;
    struct ring *rings = aligned_alloc(64, sizeof(struct ring) * (size_t)pairs);
    memset(rings, 0, sizeof(struct ring) * (size_t)pairs);
    pthread_t t[128];
    for (int i = 0; i < pairs; i++) {
        pthread_create(&t[2 * i], NULL, produce, &rings[i]);
        pthread_create(&t[2 * i + 1], NULL, consume, &rings[i]);
    }
    for (int i = 0; i < 2 * pairs; i++) pthread_join(t[i], NULL);
    free(rings);
    return 0;
}
