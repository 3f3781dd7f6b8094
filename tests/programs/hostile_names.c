/* Threads whose names would act on a terminal or a parser: one holds a
 * terminal escape and a newline that starts a forged frame line, one a byte
 * that is not UTF-8.  Both wait in hostile(), a function the tests rename
 * (objcopy --redefine-sym) to the same kind of name.  Prints "ready" once
 * the names are set, then waits.
 * Usage: hostile_names [NAME NAME] (other names: bench/fuzz.py) */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <unistd.h>

static pthread_barrier_t named;

__attribute__((noinline)) void hostile(void)
{
    for (;;)
        pause();
}

static void *run_named(void *name)
{
    prctl(PR_SET_NAME, (unsigned long)name, 0, 0, 0);
    pthread_barrier_wait(&named);
    hostile();
    return NULL;
}

int main(int argc, char **argv)
{
    char *names[] = {"\033[2J\n#9 fake", "x\377"};
    pthread_t threads[2];
    if (argc == 3)
        names[0] = argv[1], names[1] = argv[2];
    pthread_barrier_init(&named, NULL, 3);
    for (int i = 0; i < 2; i++)
        pthread_create(&threads[i], NULL, run_named, names[i]);
    pthread_barrier_wait(&named);
    printf("ready\n");
    fflush(stdout);
    hostile();
}
