/* Forks while other threads allocate and free without pause, so that some region's
 * lock is often held at the moment of the fork; each child allocates and exits 0
 * (an alarm kills a child that deadlocks). Usage: fork FORKS. */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static atomic_int stop;

static void *churn(void *arg) {
    size_t base = (size_t)arg;
    while (!atomic_load(&stop)) {
        char *p[16];
        for (int i = 0; i < 16; i++) {
            p[i] = malloc(base + 24 * i);
            p[i][0] = (char)i;
        }
        for (int i = 0; i < 16; i++) free(p[i]);
        char *big = malloc(100000 + base);
        big[0] = 1;
        free(big);
    }
    return NULL;
}

int main(int argc, char **argv) {
    int forks = argc > 1 ? atoi(argv[1]) : 200;
    pthread_t t[3];
    for (int i = 0; i < 3; i++) pthread_create(&t[i], NULL, churn, (void *)(size_t)(8 + 40 * i));
    int failed = 0;
    for (int k = 0; k < forks; k++) {
        pid_t pid = fork();
        if (pid == 0) {
            alarm(5);
            for (int i = 0; i < 100; i++) {
                char *p = malloc(16 + i * 50);
                memset(p, i, 16 + i * 50);
                free(p);
            }
            free(malloc(1 << 20));
            _exit(0);
        }
        int status = 0;
        waitpid(pid, &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "fork: child %d ended with status %d\n", k, status);
            failed++;
        }
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < 3; i++) pthread_join(t[i], NULL);
    if (failed) return 1;
    printf("fork: ok\n");
    return 0;
}
