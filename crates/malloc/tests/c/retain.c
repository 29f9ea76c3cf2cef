/* Allocates 64 MiB in blocks of 100 bytes to 1 MiB, touches them, frees them all,
 * then waits without calling malloc, reading its resident set (from /proc/self/statm,
 * with raw system calls into buffers on the stack: no stdio, which allocates) as it
 * goes. Prints, in KiB and one line, "BASE PEAK FREED AFTER WAITED PURGERS": the
 * resident set before the allocations, with them all live, right after the frees
 * and after the wait; the milliseconds waited; the threads named bento-purge.
 *
 * Usage: retain idle WAIT_MS LIMIT_MS — sleeps WAIT_MS, then polls every 20 ms
 *            until the resident set is back within 6 MiB of BASE or LIMIT_MS passed.
 *        retain fork WAIT_MS LIMIT_MS — the same in a child forked once the memory
 *            is freed (kept by its parent), after it allocates and frees 64 MiB of
 *            its own; the parent forks 20 more children that allocate and exit, then
 *            waits for the first; the child's line is printed.
 *        retain peak SIZE MIB WAIT_MS LIMIT_MS — allocates MIB MiB in blocks of SIZE
 *            bytes (touched whole), frees them all, makes one more allocation (a
 *            program that goes on: the purger starts from an allocation when only
 *            small frees kept memory), and does as `idle`.
 *        retain quick — a few allocations; prints "quick: ok". */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { MAX_BLOCKS = 1 << 16, TOTAL = 64 << 20, SLACK_KIB = 6 << 10 };

static void *blocks[MAX_BLOCKS];

static long sys_open(const char *path) { return syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC); }

static long sys_read(long fd, char *buf, size_t n) { return syscall(SYS_read, fd, buf, n); }

static void sys_close(long fd) { syscall(SYS_close, fd); }

static void put(const char *s, size_t n) {
    while (n > 0) {
        long w = syscall(SYS_write, 1, s, n);
        if (w <= 0) return;
        s += w;
        n -= (size_t)w;
    }
}

static void put_num(long v) {
    char buf[24];
    int i = sizeof buf;
    unsigned long u = v < 0 ? (unsigned long)-v : (unsigned long)v;
    do buf[--i] = (char)('0' + u % 10);
    while ((u /= 10) != 0 && i > 1);
    if (v < 0) buf[--i] = '-';
    put(buf + i, sizeof buf - (size_t)i);
}

/* The resident set in KiB, or -1. */
static long rss_kib(void) {
    char buf[256];
    long fd = sys_open("/proc/self/statm");
    if (fd < 0) return -1;
    long n = sys_read(fd, buf, sizeof buf - 1);
    sys_close(fd);
    if (n <= 0) return -1;
    buf[n] = 0;
    char *p = buf;
    while (*p && *p != ' ') p++; /* size */
    long pages = 0;
    for (p++; *p >= '0' && *p <= '9'; p++) pages = pages * 10 + (*p - '0');
    return pages * (sysconf(_SC_PAGESIZE) / 1024);
}

static long now_ms(void) {
    struct timespec t;
    syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &t);
    return (long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static void sleep_ms(long ms) {
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000};
    syscall(SYS_clock_nanosleep, CLOCK_MONOTONIC, 0, &t, NULL);
}

/* The threads of this process named bento-purge. */
static int purgers(void) {
    long dir = syscall(SYS_openat, AT_FDCWD, "/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0) return -1;
    char buf[4096];
    int found = 0;
    long n;
    while ((n = syscall(SYS_getdents64, dir, buf, sizeof buf)) > 0) {
        for (long off = 0; off < n;) {
            unsigned short reclen = *(unsigned short *)(buf + off + 16);
            const char *name = buf + off + 19;
            off += reclen;
            if (name[0] == '.') continue;
            char path[64] = "/proc/self/task/";
            size_t len = strlen(path), k = strlen(name);
            if (len + k + 6 >= sizeof path) continue;
            memcpy(path + len, name, k);
            memcpy(path + len + k, "/comm", 6);
            char comm[32];
            long fd = sys_open(path);
            if (fd < 0) continue;
            long m = sys_read(fd, comm, sizeof comm);
            sys_close(fd);
            if (m == 12 && memcmp(comm, "bento-purge\n", 12) == 0) found++;
        }
    }
    sys_close(dir);
    return found;
}

static uint64_t state = 0x9e3779b97f4a7c15u;

static uint64_t next(void) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
}

/* Allocates TOTAL bytes in blocks from 100 bytes to 1 MiB (log-uniform: most
 * blocks small, most bytes in large ones), touching every byte; returns the count. */
static int allocate(void) {
    size_t total = 0;
    int n = 0;
    while (total < TOTAL && n < MAX_BLOCKS) {
        /* 100 * 2^(k/8) for k in 0..106: 100 bytes to about 1 MiB. */
        unsigned k = (unsigned)(next() % 107);
        size_t size = 100;
        for (unsigned i = 0; i < k / 8; i++) size *= 2;
        size += size * (k % 8) / 8;
        if (size > (1 << 20)) size = 1 << 20;
        char *p = malloc(size);
        if (p == NULL) abort();
        memset(p, (int)n, size);
        blocks[n++] = p;
        total += size;
    }
    return n;
}

/* Frees the blocks, every other one first. */
static void free_all(int n) {
    for (int i = 0; i < n; i += 2) free(blocks[i]);
    for (int i = 1; i < n; i += 2) free(blocks[i]);
}

/* Allocates `total` bytes in blocks of `size` (at least a pointer), each holding the
 * previous one's address in its first word and every byte touched; returns the last. */
static void **chain(size_t size, size_t total) {
    void **last = NULL;
    for (size_t done = 0; done < total; done += size) {
        void **p = malloc(size);
        if (p == NULL) abort();
        memset(p, 1, size);
        *p = last;
        last = p;
    }
    return last;
}

/* Frees a chain, from its last block back. */
static void unchain(void **p) {
    while (p != NULL) {
        void **prev = *p;
        free(p);
        p = prev;
    }
}

/* With what was allocated just freed: waits, and prints the line. */
static void measure_freed(long base, long peak, long wait_ms, long limit_ms) {
    long freed = rss_kib();
    long start = now_ms();
    sleep_ms(wait_ms);
    long after = rss_kib();
    while (after > base + SLACK_KIB && now_ms() - start < limit_ms) {
        sleep_ms(20);
        after = rss_kib();
    }
    long waited = now_ms() - start;
    long line[] = {base, peak, freed, after, waited, purgers()};
    for (size_t i = 0; i < sizeof line / sizeof line[0]; i++) {
        if (i > 0) put(" ", 1);
        put_num(line[i]);
    }
    put("\n", 1);
}

/* Frees what `allocate` made, waits, and prints the line. */
static void measure(long base, long peak, int n, long wait_ms, long limit_ms) {
    free_all(n);
    measure_freed(base, peak, wait_ms, limit_ms);
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "quick";
    long wait_ms = argc > 2 ? atol(argv[2]) : 1000;
    long limit_ms = argc > 3 ? atol(argv[3]) : 10000;
    /* The allocator's tables, before the baseline. */
    free(malloc(64));
    if (strcmp(mode, "quick") == 0) {
        for (int i = 0; i < 1000; i++) free(malloc(16 + (size_t)i * 40));
        put("quick: ok\n", 10);
        return 0;
    }
    if (strcmp(mode, "peak") == 0 && argc == 6) {
        size_t size = (size_t)atol(argv[2]);
        size_t total = (size_t)atol(argv[3]) << 20;
        long base = rss_kib();
        void **last = chain(size < sizeof(void *) ? sizeof(void *) : size, total);
        long peak = rss_kib();
        unchain(last);
        free(malloc(64));
        measure_freed(base, peak, atol(argv[4]), atol(argv[5]));
        return 0;
    }
    long base = rss_kib();
    int n = allocate();
    long peak = rss_kib();
    if (strcmp(mode, "idle") == 0) {
        measure(base, peak, n, wait_ms, limit_ms);
        return 0;
    }
    if (strcmp(mode, "fork") != 0) return 2;
    /* The parent's memory, freed and kept (its purger may be ticking meanwhile). */
    free_all(n);
    pid_t first = fork();
    if (first < 0) return 3;
    if (first == 0) {
        /* The child: its own 64 MiB, freed while its parent's kept pages are its
         * too; it starts a purger of its own. */
        alarm(60);
        int m = allocate();
        measure(base, rss_kib(), m, wait_ms, limit_ms);
        _exit(0);
    }
    int failed = 0;
    for (int k = 0; k < 20; k++) {
        pid_t pid = fork();
        if (pid == 0) {
            alarm(10);
            for (int i = 0; i < 64; i++) {
                char *p = malloc(4096 + (size_t)i * 8192);
                if (p == NULL) _exit(1);
                p[0] = 1;
                free(p);
            }
            _exit(0);
        }
        int status = 0;
        waitpid(pid, &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) failed++;
    }
    int status = 0;
    waitpid(first, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) failed++;
    return failed ? 1 : 0;
}
