/* C23's free_sized and free_aligned_sized, looked up at run time (a C library may
 * lack them: glibc before 2.40 does), and glibc's mallinfo2: what bento-malloc and
 * glibc both promise.
 * Usage: sized CASE, where CASE is
 *   ok           blocks of every size from malloc, calloc, realloc and aligned_alloc,
 *                freed sized (or with free where the library has no sized free);
 *                mallinfo2 counts them in use, and not once they are freed;
 *   wrong-size   a block of 100 bytes freed as one of 5000 (misuse);
 *   wrong-align  an alignment that is no power of two (misuse).
 * Prints "CASE: ok, sized frees found|absent" when nothing went wrong. */
#include <dlfcn.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void (*free_sized_fn)(void *, size_t);
typedef void (*free_aligned_sized_fn)(void *, size_t, size_t);

static free_sized_fn free_sized_p;
static free_aligned_sized_fn free_aligned_sized_p;

static size_t used(void) {
    struct mallinfo2 m = mallinfo2();
    /* glibc counts mapped blocks apart; bento-malloc maps none one by one. */
    return m.uordblks + m.hblkhd;
}

static void give_back(void *p, size_t size) {
    if (free_sized_p) free_sized_p(p, size);
    else free(p);
}

static void give_back_aligned(void *p, size_t align, size_t size) {
    if (free_aligned_sized_p) free_aligned_sized_p(p, align, size);
    else free(p);
}

enum { EACH = 16 };

static int every_size(void) {
    static const size_t sizes[] = {0,    1,    8,     16,     17,      24,      100,
                                   256,  257,  1000,  2049,   4096,    4097,    5000,
                                   65536, 100000, 3 << 20, 20 << 20};
    const size_t n = sizeof sizes / sizeof sizes[0];
    static void *held[sizeof sizes / sizeof sizes[0]][3 * EACH];
    size_t before = used();
    size_t asked = 0;
    for (size_t s = 0; s < n; s++) {
        size_t size = sizes[s];
        for (int i = 0; i < EACH; i++) {
            void *a = malloc(size);
            void *b = calloc(1, size);
            /* realloc to the size from a smaller and a larger one. */
            void *c = realloc(malloc(size / 2 + 1), size);
            if (!a || !b || (!c && size)) return 1;
            if (size) {
                memset(a, 1, size);
                if (((unsigned char *)b)[size - 1] != 0) return 2;
            }
            held[s][3 * i] = a;
            held[s][3 * i + 1] = b;
            held[s][3 * i + 2] = c;
            asked += 3 * size;
        }
    }
    size_t during = used();
    if (during < before + asked) {
        fprintf(stderr, "mallinfo2: %zu in use with %zu more asked for, %zu before\n", during,
                asked, before);
        return 3;
    }
    for (size_t s = 0; s < n; s++)
        for (int i = 0; i < 3 * EACH; i++)
            if (held[s][i]) give_back(held[s][i], sizes[s]);
    static const size_t aligns[] = {16, 64, 4096, 65536};
    for (size_t a = 0; a < sizeof aligns / sizeof aligns[0]; a++) {
        for (size_t k = 1; k <= 64; k *= 4) {
            size_t size = aligns[a] * k;
            void *p = aligned_alloc(aligns[a], size);
            if (!p || (size_t)p % aligns[a]) return 4;
            memset(p, 2, size);
            give_back_aligned(p, aligns[a], size);
        }
    }
    free_sized_p(NULL, 10);
    free_aligned_sized_p(NULL, 64, 10);
    size_t after = used();
    if (after > before + (64 << 10)) {
        fprintf(stderr, "mallinfo2: %zu in use once freed, %zu before\n", after, before);
        return 5;
    }
    return 0;
}

static void none(void *p, size_t size) {
    (void)size;
    free(p);
}

static void none_aligned(void *p, size_t align, size_t size) {
    (void)align;
    (void)size;
    free(p);
}

int main(int argc, char **argv) {
    const char *which = argc > 1 ? argv[1] : "ok";
    free_sized_p = (free_sized_fn)dlsym(RTLD_DEFAULT, "free_sized");
    free_aligned_sized_p = (free_aligned_sized_fn)dlsym(RTLD_DEFAULT, "free_aligned_sized");
    const char *found = free_sized_p && free_aligned_sized_p ? "found" : "absent";
    if (!free_sized_p || !free_aligned_sized_p) {
        free_sized_p = none;
        free_aligned_sized_p = none_aligned;
    }
    int bad = 0;
    if (!strcmp(which, "ok")) {
        bad = every_size();
    } else if (!strcmp(which, "wrong-size")) {
        void *p = malloc(100);
        free_sized_p(p, 5000);
    } else if (!strcmp(which, "wrong-align")) {
        void *p = aligned_alloc(64, 128);
        free_aligned_sized_p(p, 3, 128);
    } else {
        return 9;
    }
    if (bad) return bad;
    printf("%s: ok, sized frees %s\n", which, found);
    return 0;
}
