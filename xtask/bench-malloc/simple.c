/* Batches of small blocks of one size allocated and then freed in order, in the shape
 * of glibc's bench-malloc-simple (mimalloc-bench's glibc-simple): sizes 16 to 256
 * bytes, 25 to 1600 blocks a batch, one thread. Usage: simple ROUNDS. */
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    long rounds = argc > 1 ? atol(argv[1]) : 100;
    static void *held[1600];
    const size_t sizes[] = {16, 32, 64, 128, 256};
    const int counts[] = {25, 100, 400, 1600};
    unsigned long sum = 0;
    for (long r = 0; r < rounds; r++) {
        for (int s = 0; s < 5; s++) {
            for (int c = 0; c < 4; c++) {
                /* About the same number of blocks per count. */
                int n = counts[c];
                for (int it = 0; it < 16000 / n; it++) {
                    for (int i = 0; i < n; i++) {
                        held[i] = malloc(sizes[s]);
                        if (held[i] == NULL) abort();
                        *(char *)held[i] = (char)i;
                    }
                    for (int i = 0; i < n; i++) {
                        sum += *(unsigned char *)held[i];
                        free(held[i]);
                    }
                }
            }
        }
    }
    return (int)(sum & 1);
}
