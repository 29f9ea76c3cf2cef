/* Fills 128 MiB in 64 KiB blocks and 48-byte ones, and prints the minor page faults
 * that took: `huge: FAULTS`. Under BENTO_HUGE=1 the kernel backs the reservations
 * with 2 MiB pages where it has transparent huge pages, so far fewer faults. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

static long faults(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_minflt;
}

int main(void) {
    enum { N = 4096 };
    static void *blocks[N];
    long before = faults();
    for (int i = 0; i < N; i++) {
        size_t size = i % 2 ? 65536 : 48;
        blocks[i] = malloc(size);
        if (!blocks[i]) {
            fprintf(stderr, "huge: out of memory\n");
            return 1;
        }
        memset(blocks[i], 1, size);
    }
    long taken = faults() - before;
    for (int i = 0; i < N; i++) {
        free(blocks[i]);
    }
    printf("huge: %ld\n", taken);
    return 0;
}
