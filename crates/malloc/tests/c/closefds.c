/* A program that closes (or takes over) descriptors it did not open, as daemons,
 * sandboxes and shells do, then opens a data file and writes 100,000 bytes of known
 * content to it (byte i is (i * 131 + 7) % 251) in 100 pieces, with 500 mallocs and
 * frees between pieces: a trace of it fills its buffer many times over. Prints the
 * number of mallocs it made on stdout.
 *
 * Usage: closefds MODE DATA
 *   close     closes descriptors 3 to 1023, then opens DATA;
 *   closefrom closefrom(3), then opens DATA;
 *   closeall  closes every descriptor from 2 up (stderr too), then opens DATA, which
 *             takes number 2;
 *   dup2      opens DATA and dup2s it onto every other open descriptor from 3 up (a
 *             shell's `exec N>file` onto each);
 *   replace   renames the file $BENTO_TRACE names to $BENTO_TRACE.old, puts a new
 *             file holding "not the trace\n" in its place, then does as `close`. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { PIECES = 100, PIECE = 1000, PAIRS = 500, KEPT = 64 };

static void put(int fd, const char *s, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, s, n);
        if (w <= 0) exit(3);
        s += w;
        n -= (size_t)w;
    }
}

static int open_data(const char *path) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) exit(4);
    return fd;
}

int main(int argc, char **argv) {
    if (argc != 3) return 2;
    const char *mode = argv[1], *path = argv[2];
    long max = sysconf(_SC_OPEN_MAX);
    if (max < 0 || max > 1 << 20) max = 1 << 20;
    int data;
    if (strcmp(mode, "close") == 0 || strcmp(mode, "replace") == 0) {
        if (strcmp(mode, "replace") == 0) {
            const char *trace = getenv("BENTO_TRACE");
            char old[4096];
            if (trace == NULL || snprintf(old, sizeof old, "%s.old", trace) >= (int)sizeof old) return 5;
            if (rename(trace, old) != 0) return 6;
            int other = open(trace, O_WRONLY | O_CREAT | O_EXCL, 0644);
            if (other < 0) return 7;
            put(other, "not the trace\n", 14);
            close(other);
        }
        for (int fd = 3; fd < 1024; fd++) close(fd);
        data = open_data(path);
    } else if (strcmp(mode, "closefrom") == 0) {
        closefrom(3);
        data = open_data(path);
    } else if (strcmp(mode, "closeall") == 0) {
        for (long fd = 2; fd < max; fd++) close((int)fd);
        data = open_data(path);
        if (data != 2) return 8;
    } else if (strcmp(mode, "dup2") == 0) {
        data = open_data(path);
        for (long fd = 3; fd < max; fd++)
            if (fd != data && fcntl((int)fd, F_GETFD) != -1 && dup2(data, (int)fd) < 0) return 9;
    } else {
        return 2;
    }
    char piece[PIECE];
    void *kept[KEPT] = {0};
    long mallocs = 0, at = 0;
    for (int i = 0; i < PIECES; i++) {
        for (int k = 0; k < PIECE; k++, at++) piece[k] = (char)((at * 131 + 7) % 251);
        put(data, piece, PIECE);
        for (int j = 0; j < PAIRS; j++) {
            int slot = (i * PAIRS + j) % KEPT;
            free(kept[slot]);
            kept[slot] = malloc(16 + (size_t)((i * 7919 + j * 104729) % 6000));
            if (kept[slot] == NULL) return 10;
            memset(kept[slot], i, 16);
            mallocs++;
        }
    }
    for (int k = 0; k < KEPT; k++) free(kept[k]);
    char line[32];
    int len = snprintf(line, sizeof line, "%ld\n", mallocs);
    put(1, line, (size_t)len);
    return 0;
}
