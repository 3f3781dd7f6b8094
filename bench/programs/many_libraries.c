/* Loads every library named on its command line (each with a lib_wait
 * that calls back), then waits in three threads, each inside another
 * library's lib_wait: the first, the middle and the last loaded.  Prints
 * "ready" once they wait.  Usage: many_libraries LIBRARY... */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

typedef void (*lib_wait)(void (*)(void));
static lib_wait waits[3];

static void wait_forever(void)
{
    for (;;)
        pause();
}

static void *waiter(void *arg)
{
    waits[(long)arg](wait_forever);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: many_libraries LIBRARY...\n");
        return 2;
    }
    for (int i = 1; i < argc; i++) {
        void *library = dlopen(argv[i], RTLD_NOW | RTLD_LOCAL);
        if (!library) {
            fprintf(stderr, "%s\n", dlerror());
            return 1;
        }
        lib_wait found = (lib_wait)dlsym(library, "lib_wait");
        if (i == 1)
            waits[0] = found;
        if (i == (argc + 1) / 2)
            waits[1] = found;
        if (i == argc - 1)
            waits[2] = found;
    }
    pthread_t threads[2];
    for (long i = 1; i <= 2; i++)
        pthread_create(&threads[i - 1], NULL, waiter, (void *)i);
    printf("ready\n");
    fflush(stdout);
    waits[0](wait_forever);
    return 0;
}
