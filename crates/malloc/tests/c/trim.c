/* Allocates some 400 MiB in blocks of every size, frees it all, then calls
 * malloc_trim; prints the address space (VmSize, KiB) at the start, once everything
 * is freed and after the trim, as "start freed trimmed". Usage: trim. */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long vm_size(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    while (f != NULL && fgets(line, sizeof line, f))
        if (strncmp(line, "VmSize:", 7) == 0) kib = atol(line + 7);
    if (f != NULL) fclose(f);
    return kib;
}

int main(void) {
    enum { N = 200000 };
    static void *p[N];
    long start = vm_size();
    for (int i = 0; i < N; i++) p[i] = malloc(16 + (i * 7919) % 4000);
    for (int i = 0; i < N; i += 1000) p[i] = realloc(p[i], 1 << 20);
    for (int i = 0; i < N; i++) free(p[i]);
    long freed = vm_size();
    if (malloc_trim(0) != 1) return 1;
    long trimmed = vm_size();
    printf("%ld %ld %ld\n", start, freed, trimmed);
    return 0;
}
