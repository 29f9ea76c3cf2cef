/* A small program whose allocations are known: N rounds of malloc, realloc and free.
 * At exit it writes how many allocations it made and how many reallocs moved their
 * block, as "allocs moved" on stdout (with write(2), so stdio allocates nothing).
 * Usage: traced N. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 1000;
    long allocs = 0, moved = 0;
    void *keep[64] = {0};
    for (int i = 0; i < n; i++) {
        char *p = malloc(16 + (i * 37) % 3000);
        allocs++;
        char *q = realloc(p, 16 + (i * 101) % 9000);
        if (q != p) moved++;
        int k = i % 64;
        free(keep[k]);
        keep[k] = q;
    }
    for (int k = 0; k < 64; k++) free(keep[k]);
    char line[64];
    int len = snprintf(line, sizeof line, "%ld %ld\n", allocs, moved);
    write(1, line, (size_t)len);
    return 0;
}
