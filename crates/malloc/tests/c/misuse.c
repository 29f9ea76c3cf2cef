/* One misuse of free or realloc, named by the first argument; the library must report
 * it on stderr and abort before it touches its state. Usage: misuse CASE [SIZE].
 * `misuse aligned` is no misuse: blocks of every alignment, freed, sized and
 * resized through the pointer alone, must pass the checks; it prints "aligned: ok". */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Aligned blocks of many sizes: malloc_usable_size, realloc and free on each. */
static int aligned(void) {
    size_t sizes[] = {1, 24, 100, 256, 300, 4000, 70000, 3 << 20, 20 << 20};
    for (size_t a = 32; a <= (2u << 20); a *= 4) {
        for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
            size_t n = sizes[k];
            void *p = NULL, *q = memalign(a, n), *r = aligned_alloc(a, n);
            if (posix_memalign(&p, a, n) != 0 || q == NULL || r == NULL) return 2;
            if ((size_t)p % a || (size_t)q % a || (size_t)r % a) return 3;
            if (malloc_usable_size(p) < n || malloc_usable_size(q) < n) return 4;
            memset(p, 1, n);
            p = realloc(p, n * 2 + 1);
            q = realloc(q, n / 2 + 1);
            if (p == NULL || q == NULL) return 5;
            free(p);
            free(q);
            free(r);
        }
    }
    void *v = valloc(5000), *pv = pvalloc(100);
    if (v == NULL || pv == NULL) return 6;
    free(v);
    free(pv);
    printf("aligned: ok\n");
    return 0;
}

int main(int argc, char **argv) {
    const char *c = argc > 1 ? argv[1] : "";
    if (strcmp(c, "aligned") == 0) return aligned();
    size_t size = argc > 2 ? (size_t)atol(argv[2]) : 64;
    /* Freed megabytes are kept and start bento's purger thread, whose creation
     * allocates (glibc's TLS vector for it): started here, not between two frees of
     * the same block, where it could take the freed block's place and make the second
     * free name a live block. */
    free(malloc(4 << 20));
    char *p = malloc(size);
    char *keep = malloc(size); /* a neighbour, so that p's chunk stays a chunk */
    if (p == NULL || keep == NULL) return 2;
    memset(p, 0x41, size);
    /* Inside the block: 16 bytes in, or 8 in a block of 16 (whose next 16 bytes
     * may be `keep`, a block of its own). */
    size_t in = size > 16 ? 16 : 8;
    if (strcmp(c, "interior") == 0) {
        free(p + in);
    } else if (strcmp(c, "interior-zeroed") == 0) {
        memset(p, 0, size);
        free(p + in);
    } else if (strcmp(c, "double") == 0) {
        free(p);
        free(p);
    } else if (strcmp(c, "double-later") == 0) {
        /* freed twice with other work between */
        free(p);
        void *a = malloc(size * 2 + 300);
        free(a);
        free(p);
    } else if (strcmp(c, "realloc-freed") == 0) {
        free(p);
        p = realloc(p, size * 2);
    } else if (strcmp(c, "usable-interior") == 0) {
        return (int)malloc_usable_size(p + 32);
    } else {
        return 2;
    }
    /* Not reached when the misuse is caught: two fresh blocks that overlap would be
     * the damage it did. */
    char *x = malloc(size), *y = malloc(size);
    printf("misuse %s not caught: %p %p\n", c, (void *)x, (void *)y);
    return 1;
}
