/* Memory bugs in blocks the guard sampler took (run with BENTO_GUARD=1,16: every
 * allocation guarded). Each mode makes one and dies of it, with bento's report;
 * `chain` faults outside the pool, which goes to the program's own handler. Two
 * blocks each time: the sampler puts every other block against its slot's start,
 * the others against its end, so one of the two faults at its first bad byte. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

__attribute__((noinline)) char *make_block(size_t n) {
    char *p = malloc(n);
    if (!p) abort();
    memset(p, 1, n);
    return p;
}

__attribute__((noinline)) void drop_block(char *p) { free(p); }

__attribute__((noinline)) void touch(volatile char *p, long at) { p[at] = 2; }

static void own_handler(int sig) {
    (void)sig;
    static const char line[] = "own handler\n";
    write(1, line, sizeof line - 1);
    _exit(3);
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    if (!strcmp(mode, "overrun")) {
        char *a = make_block(96), *b = make_block(96);
        touch(a, 96);
        touch(b, 96);
    } else if (!strcmp(mode, "slack")) {
        /* Past the end but inside the 16-byte alignment's slack: found at the free. */
        char *a = make_block(100);
        touch(a, 100);
        drop_block(a);
    } else if (!strcmp(mode, "underrun")) {
        char *a = make_block(48), *b = make_block(48);
        touch(a, -1);
        touch(b, -1);
    } else if (!strcmp(mode, "use-after-free")) {
        char *a = make_block(64);
        drop_block(a);
        touch(a, 8);
    } else if (!strcmp(mode, "double-free")) {
        char *a = make_block(32);
        drop_block(a);
        drop_block(a);
    } else if (!strcmp(mode, "chain")) {
        /* The program's handler, installed before the pool's (which comes with the
         * first allocation and passes it faults that are not in the pool). */
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = own_handler;
        sigaction(SIGSEGV, &sa, NULL);
        char *a = make_block(16);
        struct sigaction now;
        sigaction(SIGSEGV, NULL, &now);
        if (now.sa_handler == own_handler) {
            puts("the pool's handler is not installed");
            return 1;
        }
        drop_block(a);
        touch((volatile char *)16, 0);
    } else if (!strcmp(mode, "ok")) {
        /* Guarded blocks used rightly: sizes up to two pages and past them,
         * realloc across the boundary, calloc zeroed. */
        for (int i = 0; i < 1000; i++) {
            size_t n = 1 + (size_t)(i * 97) % 9000;
            char *p = make_block(n);
            p = realloc(p, n + 500);
            memset(p, 3, n + 500);
            char *z = calloc(n, 1);
            for (size_t k = 0; k < n; k++)
                if (z[k]) { puts("calloc not zero"); return 1; }
            free(z);
            free(p);
        }
        puts("ok");
        return 0;
    }
    puts("no fault");
    return 1;
}
