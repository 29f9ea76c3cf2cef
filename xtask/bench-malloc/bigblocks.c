/* Blocks of 1 to 5 MiB allocated, written page by page and freed, in a loop: where an
 * allocator that gives pages back to the OS at once pays the most. */
#include <stdio.h>
#include <stdlib.h>

int main(void) {
    unsigned long x = 88172645463325252ul, check = 0;
    for (int i = 0; i < 3000; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        size_t size = (1u << 20) + (size_t)(x % (4u << 20));
        unsigned char *p = malloc(size);
        if (!p) return 1;
        for (size_t at = 0; at < size; at += 4096) p[at] = (unsigned char)at;
        check += p[size / 2 & ~(size_t)4095];
        free(p);
    }
    printf("%lu\n", check);
    return 0;
}
