/* Allocates, then ends with _exit: no exit handler runs. Usage: quick_exit. */
#include <stdlib.h>
#include <unistd.h>

int main(void) {
    for (int i = 0; i < 100; i++) free(malloc(32 + i));
    _exit(0);
}
