/* One misuse of free or realloc, named by the first argument; the library must report
 * it on stderr and abort before it touches its state. Usage: misuse CASE. */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    const char *c = argc > 1 ? argv[1] : "";
    size_t size = argc > 2 ? (size_t)atol(argv[2]) : 64;
    char *p = malloc(size);
    char *keep = malloc(size); /* a neighbour, so that p's chunk stays a chunk */
    if (p == NULL || keep == NULL) return 2;
    memset(p, 0x41, size);
    if (strcmp(c, "interior") == 0) {
        free(p + 16);
    } else if (strcmp(c, "interior-zeroed") == 0) {
        memset(p, 0, size);
        free(p + 16);
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
