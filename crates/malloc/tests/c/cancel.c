/* Threads that allocate and free in a loop are cancelled (deferred cancellation: at
 * the next cancellation point they reach) while the others go on allocating, then
 * joined; the main thread allocates after. The loop reaches a cancellation point of
 * its own only once in 65,536 turns, and with BENTO_TRACE set the trace's buffer
 * is written out every few thousand: a cancellation that took effect in that write,
 * with the trace's lock held, would leave every other thread waiting on it for ever.
 * Usage: cancel ROUNDS. Prints "cancel: ok". */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { THREADS = 4 };

static atomic_long turns;

static void *churn(void *arg) {
    (void)arg;
    for (unsigned long i = 1;; i++) {
        void *p = malloc(16 + i % 200);
        if (p == NULL) abort();
        memset(p, 1, 16);
        free(p);
        atomic_fetch_add_explicit(&turns, 1, memory_order_relaxed);
        if (i % 65536 == 0) pthread_testcancel();
    }
    return NULL;
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 20;
    for (int r = 0; r < rounds; r++) {
        pthread_t t[THREADS];
        for (int i = 0; i < THREADS; i++)
            if (pthread_create(&t[i], NULL, churn, NULL) != 0) abort();
        /* Enough turns for the buffer to be written out several times. */
        long start = atomic_load(&turns);
        struct timespec pause = {0, 1000000};
        while (atomic_load(&turns) - start < 100000) nanosleep(&pause, NULL);
        for (int i = 0; i < THREADS; i++) pthread_cancel(t[i]);
        for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
        free(malloc(100));
    }
    const char ok[] = "cancel: ok\n";
    write(1, ok, sizeof ok - 1);
    return 0;
}
