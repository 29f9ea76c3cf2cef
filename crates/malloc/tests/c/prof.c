/* A program whose "level 2" leaks 2 MiB in blocks of 64 KiB, profiled with
 * BENTO_PROF: `bento_prof_mark` before the level, `bento_prof_dump(PATH, 1)` after
 * it (what the level left live), and the whole profile at exit. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Weak: bento-malloc, preloaded, defines them. */
__attribute__((weak)) int bento_prof_dump(const char *path, int since_mark);
__attribute__((weak)) unsigned bento_prof_mark(void);

__attribute__((noinline)) void play_level(int leak) {
    void *kept[32];
    for (int round = 0; round < 200; round++) {
        void *p[64];
        for (int i = 0; i < 64; i++) {
            p[i] = malloc(16 + (size_t)(i * 97 + round) % 4000);
            memset(p[i], 1, 16);
        }
        for (int i = 0; i < 64; i++) free(p[i]);
    }
    if (leak) {
        for (int i = 0; i < 32; i++) {
            kept[i] = malloc(64 << 10);
            memset(kept[i], 2, 64 << 10);
        }
    }
    (void)kept;
}

__attribute__((noinline)) void leak_level(void) { play_level(1); }

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    if (!bento_prof_mark || !bento_prof_dump) { puts("not bento-malloc"); return 1; }
    play_level(0);
    if (bento_prof_mark() == 0) { puts("no profile"); return 1; }
    leak_level();
    if (bento_prof_dump(argv[1], 1) != 0) { puts("no dump"); return 1; }
    puts("ok");
    return 0;
}
