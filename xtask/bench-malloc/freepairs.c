/* malloc/free pairs in LIFO batches of 100, for instruction counts of the C path
 * under callgrind: `freepairs MODE ROUNDS`, MODE 0 for 64-byte blocks, 1 for sizes
 * drawn from 16 to 4096 bytes. Two runs with different ROUNDS give the cost of a
 * pair as the difference of their totals over the difference of their pairs. */
#include <stdlib.h>

int main(int argc, char **argv) {
    int mode = argc > 1 ? atoi(argv[1]) : 0;
    long rounds = argc > 2 ? atol(argv[2]) : 1000;
    void *p[100];
    unsigned x = 12345;
    for (long r = 0; r < rounds; r++) {
        for (int i = 0; i < 100; i++) {
            size_t n = 64;
            if (mode == 1) {
                x = x * 1103515245u + 12345u;
                n = 16 + (x >> 8) % 4080;
            }
            p[i] = malloc(n);
            *(volatile char *)p[i] = 1;
        }
        for (int i = 99; i >= 0; i--) free(p[i]);
    }
    return 0;
}
