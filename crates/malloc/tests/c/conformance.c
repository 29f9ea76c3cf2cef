/* Checks bento-malloc's C semantics; run with LD_PRELOAD=libbento_malloc.so. Exits
 * non-zero, naming the rule, at the first mismatch. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int failures = 0;
#define CHECK(cond, what)                                                      \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "conformance: %s (line %d)\n", what, __LINE__);    \
            failures++;                                                        \
        }                                                                      \
    } while (0)

extern void *reallocarray(void *, size_t, size_t);
extern void *pvalloc(size_t);
extern void *valloc(size_t);
extern void *__libc_malloc(size_t);
extern void __libc_free(void *);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

int main(void) {
    long page = sysconf(_SC_PAGESIZE);

    /* bento, not glibc: a 70-byte block is in bento's 80-byte class. */
    void *p = malloc(70);
    CHECK(p && malloc_usable_size(p) == 80, "malloc comes from bento (80-byte class)");
    free(p);

    /* Not in glibc's headers (or, for cfree, its link-time symbols): found at run
     * time, where the preloaded library provides them. */
    void (*cfree)(void *) = (void (*)(void *))dlsym(RTLD_DEFAULT, "cfree");
    int (*__posix_memalign)(void **, size_t, size_t) =
        (int (*)(void **, size_t, size_t))dlsym(RTLD_DEFAULT, "__posix_memalign");
    if (!cfree || !__posix_memalign) {
        fprintf(stderr, "conformance: cfree or __posix_memalign is missing\n");
        return 1;
    }

    /* 16-byte alignment for every size. */
    for (size_t n = 1; n < 5000; n += 37) {
        void *q = malloc(n);
        CHECK(q && ((uintptr_t)q & 15) == 0, "malloc aligns to 16");
        memset(q, 0xab, n);
        free(q);
    }

    /* malloc(0): a unique pointer that free accepts. */
    void *z1 = malloc(0), *z2 = malloc(0);
    CHECK(z1 && z2 && z1 != z2, "malloc(0) returns unique pointers");
    free(z1);
    free(z2);

    /* Huge sizes: NULL with ENOMEM, never an abort. */
    errno = 0;
    CHECK(malloc(SIZE_MAX) == NULL && errno == ENOMEM, "malloc(SIZE_MAX) -> NULL, ENOMEM");
    errno = 0;
    CHECK(malloc(SIZE_MAX / 2) == NULL && errno == ENOMEM, "malloc(SIZE_MAX/2) -> NULL, ENOMEM");
    errno = 0;
    CHECK(malloc((size_t)1 << 60) == NULL && errno == ENOMEM, "malloc(2^60) -> NULL, ENOMEM");

    /* calloc: zeroed; overflow -> NULL, ENOMEM. */
    unsigned char *c = calloc(1000, 3);
    int zero = 1;
    for (int i = 0; c && i < 3000; i++) zero &= c[i] == 0;
    CHECK(c && zero, "calloc zeroes");
    free(c);
    for (int round = 0; round < 50; round++) { /* reused memory comes back zeroed */
        unsigned char *d = malloc(256);
        memset(d, 0xff, 256);
        free(d);
        d = calloc(1, 256);
        zero = 1;
        for (int i = 0; i < 256; i++) zero &= d[i] == 0;
        CHECK(zero, "calloc zeroes reused memory");
        free(d);
    }
    errno = 0;
    CHECK(calloc(SIZE_MAX / 2, 3) == NULL && errno == ENOMEM, "calloc overflow -> NULL, ENOMEM");
    c = calloc(0, 10);
    CHECK(c != NULL, "calloc(0, n) returns a pointer");
    free(c);

    /* realloc. */
    char *r = realloc(NULL, 10);
    CHECK(r != NULL, "realloc(NULL, n) allocates");
    memcpy(r, "0123456789", 10);
    r = realloc(r, 100000);
    CHECK(r && memcmp(r, "0123456789", 10) == 0, "realloc keeps contents when growing");
    r = realloc(r, 5);
    CHECK(r && memcmp(r, "01234", 5) == 0, "realloc keeps contents when shrinking");
    r = realloc(r, 300000);
    CHECK(r && memcmp(r, "01234", 5) == 0, "realloc keeps contents across regions");
    errno = 0;
    char *big = realloc(r, SIZE_MAX);
    CHECK(big == NULL && errno == ENOMEM, "realloc(p, SIZE_MAX) -> NULL, ENOMEM");
    CHECK(memcmp(r, "01234", 5) == 0, "a failed realloc leaves the block");
    CHECK(realloc(r, 0) == NULL, "realloc(p, 0) frees and returns NULL");

    /* reallocarray. */
    int *ra = reallocarray(NULL, 10, sizeof(int));
    CHECK(ra != NULL, "reallocarray(NULL, ...) allocates");
    ra[9] = 42;
    errno = 0;
    CHECK(reallocarray(ra, SIZE_MAX / 2, 4) == NULL && errno == ENOMEM,
          "reallocarray overflow -> NULL, ENOMEM");
    CHECK(ra[9] == 42, "a failed reallocarray leaves the block");
    ra = reallocarray(ra, 1000, sizeof(int));
    CHECK(ra && ra[9] == 42, "reallocarray keeps contents");
    free(ra);

    /* posix_memalign. */
    void *m = (void *)0x1234;
    CHECK(posix_memalign(&m, 3, 100) == EINVAL && m == (void *)0x1234,
          "posix_memalign(3) -> EINVAL, memptr untouched");
    CHECK(posix_memalign(&m, 4, 100) == EINVAL && m == (void *)0x1234,
          "posix_memalign(4): not a multiple of sizeof(void*) -> EINVAL");
    CHECK(posix_memalign(&m, 0, 100) == EINVAL && m == (void *)0x1234, "posix_memalign(0) -> EINVAL");
    CHECK(posix_memalign(&m, 64, SIZE_MAX / 2) == ENOMEM && m == (void *)0x1234,
          "posix_memalign huge -> ENOMEM, memptr untouched");
    for (size_t a = 8; a <= 65536; a *= 2) {
        void *q = NULL;
        CHECK(posix_memalign(&q, a, 24) == 0 && q && ((uintptr_t)q % a) == 0, "posix_memalign aligns");
        free(q);
    }
    void *pm = NULL;
    CHECK(__posix_memalign(&pm, 256, 10) == 0 && ((uintptr_t)pm & 255) == 0, "__posix_memalign");
    free(pm);

    /* aligned_alloc and memalign. */
    errno = 0;
    CHECK(aligned_alloc(24, 48) == NULL && errno == EINVAL, "aligned_alloc(24) -> NULL, EINVAL");
    /* memalign as glibc's: 16 or less is malloc's, others round up to a power of two. */
    void *ma = memalign(24, 48);
    CHECK(ma && ((uintptr_t)ma & 31) == 0, "memalign(24) rounds up to 32");
    free(ma);
    ma = memalign(0, 48);
    CHECK(ma && ((uintptr_t)ma & 15) == 0, "memalign(0) is malloc");
    free(ma);
    errno = 0;
    CHECK(memalign(SIZE_MAX, 48) == NULL && errno == EINVAL, "memalign(SIZE_MAX) -> NULL, EINVAL");
    errno = 0;
    CHECK(aligned_alloc(0, 48) == NULL && errno == EINVAL, "aligned_alloc(0) -> NULL, EINVAL");
    void *al = aligned_alloc(4096, 100);
    CHECK(al && ((uintptr_t)al & 4095) == 0, "aligned_alloc(4096)");
    free(al);
    for (size_t n = 100; n <= 100000; n *= 10) { /* realloc of over-aligned blocks */
        unsigned char *ab = memalign(128, n);
        CHECK(ab && ((uintptr_t)ab & 127) == 0, "memalign(128)");
        for (size_t i = 0; i < n; i++) ab[i] = (unsigned char)(i * 7);
        unsigned char *grown = realloc(ab, n * 3);
        int kept = grown != NULL;
        for (size_t i = 0; kept && i < n; i++) kept &= grown[i] == (unsigned char)(i * 7);
        CHECK(kept, "realloc of a memalign block keeps its contents");
        unsigned char *shrunk = realloc(grown, n / 3 + 1);
        kept = shrunk != NULL;
        for (size_t i = 0; kept && i < n / 3 + 1; i++) kept &= shrunk[i] == (unsigned char)(i * 7);
        CHECK(kept, "shrinking a realloc'd memalign block keeps its contents");
        free(shrunk);
    }
    al = __libc_memalign(2048, 10);
    CHECK(al && ((uintptr_t)al & 2047) == 0, "__libc_memalign");
    free(al);

    /* valloc and pvalloc. */
    void *v = valloc(10);
    CHECK(v && ((uintptr_t)v % page) == 0, "valloc is page-aligned");
    free(v);
    v = pvalloc(0);
    CHECK(v && ((uintptr_t)v % page) == 0 && malloc_usable_size(v) >= (size_t)page,
          "pvalloc(0) is a page");
    free(v);
    v = pvalloc(page + 1);
    CHECK(v && malloc_usable_size(v) >= 2 * (size_t)page, "pvalloc rounds up to pages");
    free(v);

    /* free(NULL), errno kept by free, cfree, malloc_usable_size(NULL). */
    free(NULL);
    /* free keeps errno, on a small block and on one whose free gives pages back. */
    void *e = malloc(50), *e2 = malloc(20 << 20);
    errno = 1234;
    free(e);
    free(e2);
    CHECK(errno == 1234, "free keeps errno");
    cfree(malloc(10));
    CHECK(malloc_usable_size(NULL) == 0, "malloc_usable_size(NULL) == 0");
    void *u = malloc(1000);
    CHECK(malloc_usable_size(u) >= 1000, "malloc_usable_size >= size");
    free(u);

    /* glibc's aliases. */
    void *lm = __libc_malloc(33);
    /* bento's 48-byte class (glibc's chunk would hold 40). */
    CHECK(lm && malloc_usable_size(lm) == 48, "__libc_malloc is bento's");
    lm = __libc_realloc(lm, 2000);
    CHECK(lm != NULL, "__libc_realloc");
    __libc_free(lm);
    lm = __libc_calloc(4, 4);
    CHECK(lm && ((int *)lm)[3] == 0, "__libc_calloc");
    __libc_free(lm);

    if (failures) {
        fprintf(stderr, "conformance: %d failures\n", failures);
        return 1;
    }
    printf("conformance: ok\n");
    return 0;
}
