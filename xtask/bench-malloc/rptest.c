/* Threads that allocate batches of random sizes, free most of each batch in a
 * scattered order and hand the rest to the next thread to free, in the shape of
 * mimalloc-bench's rptest (rpmalloc's benchmark): many sizes live at once, frees out
 * of order, a share of them on another thread than the allocation.
 * Usage: rptest THREADS LOOPS BATCH MIN MAX (sizes in bytes, skewed to the small). */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct inbox {
    pthread_mutex_t lock;
    void **items;
    size_t n, cap;
    char pad[64];
};

static int threads;
static long loops, batch;
static size_t least, most;
static struct inbox *inboxes;

static uint64_t next(uint64_t *x) {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

static void *run(void *arg) {
    long me = (long)(intptr_t)arg;
    uint64_t x = 0x9E3779B97F4A7C15ull * (uint64_t)(me + 1);
    void **held = malloc(sizeof(void *) * (size_t)batch);
    void **mine = NULL;
    size_t mine_cap = 0;
    if (held == NULL) abort();
    struct inbox *to = &inboxes[(me + 1) % threads];
    struct inbox *own = &inboxes[me];
    for (long l = 0; l < loops; l++) {
        for (long j = 0; j < batch; j++) {
            uint64_t r = next(&x);
            size_t size = (least + (size_t)(r >> 16) % (most - least + 1)) >> (r & 7);
            if (size < least) size = least;
            held[j] = malloc(size);
            if (held[j] == NULL) abort();
            memset(held[j], (int)j, size < 64 ? size : 64);
        }
        /* Three in four freed here, scattered: a stride through the batch. */
        long keep = batch / 4;
        long stride = 7;
        while (batch % stride == 0) stride += 2;
        for (long j = 0, k = 0; j < batch; j++, k = (k + stride) % batch) {
            if (k < keep) continue;
            free(held[k]);
        }
        /* The first quarter goes to the next thread, unless it is four batches
         * behind: then this thread frees them (the live set stays bounded). */
        pthread_mutex_lock(&to->lock);
        if (to->n >= 4 * (size_t)batch) {
            pthread_mutex_unlock(&to->lock);
            for (long j = 0; j < keep; j++) free(held[j]);
            continue;
        }
        if (to->n + (size_t)keep > to->cap) {
            to->cap = (to->n + (size_t)keep) * 2;
            to->items = realloc(to->items, sizeof(void *) * to->cap);
            if (to->items == NULL) abort();
        }
        memcpy(to->items + to->n, held, sizeof(void *) * (size_t)keep);
        to->n += (size_t)keep;
        pthread_mutex_unlock(&to->lock);
        /* What the previous thread handed over is freed here. */
        pthread_mutex_lock(&own->lock);
        size_t n = own->n;
        if (n > mine_cap) {
            mine_cap = n * 2;
            mine = realloc(mine, sizeof(void *) * mine_cap);
            if (mine == NULL) abort();
        }
        memcpy(mine, own->items, sizeof(void *) * n);
        own->n = 0;
        pthread_mutex_unlock(&own->lock);
        for (size_t i = 0; i < n; i++) free(mine[i]);
    }
    free(held);
    free(mine);
    return NULL;
}

int main(int argc, char **argv) {
    threads = argc > 1 ? atoi(argv[1]) : 2;
    loops = argc > 2 ? atol(argv[2]) : 2000;
    batch = argc > 3 ? atol(argv[3]) : 1000;
    least = argc > 4 ? (size_t)atol(argv[4]) : 8;
    most = argc > 5 ? (size_t)atol(argv[5]) : 16000;
    if (threads < 1 || threads > 64 || batch < 4 || least < 1 || most < least) abort();
    inboxes = calloc((size_t)threads, sizeof(struct inbox));
    if (inboxes == NULL) abort();
    for (int i = 0; i < threads; i++) pthread_mutex_init(&inboxes[i].lock, NULL);
    pthread_t t[64];
    for (int i = 0; i < threads; i++) pthread_create(&t[i], NULL, run, (void *)(intptr_t)i);
    for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < threads; i++) {
        for (size_t j = 0; j < inboxes[i].n; j++) free(inboxes[i].items[j]);
        free(inboxes[i].items);
    }
    free(inboxes);
    return 0;
}
