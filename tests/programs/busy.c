/* Busy threads whose stacks change all the time, for the debugger-free
 * differential harness: each worker recurses to a random depth, through
 * libc's qsort (its comparison function) and snprintf (a printf specifier
 * of its own, %D) on the way, spins at the bottom and starts again; main
 * sends them SIGUSR1, whose handler recurses the same way; with LIBRARY,
 * a "loader" thread dlopens it, recurses through it and dlcloses it, over
 * and over.  With NAP, each recursion sleeps NAP microseconds at its
 * bottom (a busy process that leaves the CPU to others).  Prints "ready"
 * once every thread runs.  busy_work counts the recursions that reached
 * their bottom (bench/record.py reads it from the process's memory).
 * Usage: busy [WORKERS [LIBRARY|- [NAP]]] */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <printf.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* each thread's own: a sink two threads wrote would bounce its cache line
 * between their processors at every step of spin, at a cost that changes
 * with where the machine places them (the work counted would follow) */
static __thread volatile unsigned long sink;
unsigned long busy_work __attribute__((aligned(64)));
static __thread unsigned int seed;
/* the depth a qsort comparison goes on with (taken by its first call) */
static __thread int pending_depth;
static pthread_barrier_t started;
static const char *library;
static long nap;

void descend(int depth);

static unsigned int next_random(void)
{
    seed = seed * 1103515245u + 12345u;
    return seed >> 16;
}

__attribute__((noinline)) void spin(int rounds)
{
    for (int i = 0; i < rounds; i++)
        sink += (unsigned long)i * 7;
}

__attribute__((noinline)) static int compare(const void *a, const void *b)
{
    int depth = pending_depth;
    if (depth > 0) {
        pending_depth = 0;
        descend(depth - 1);
    }
    return *(const int *)a - *(const int *)b;
}

__attribute__((noinline)) static int print_depth(FILE *stream, const struct printf_info *info,
                                                 const void *const *args)
{
    int depth = **(const int *const *)args;
    (void)info;
    descend(depth - 1);
    return fprintf(stream, "<%d>", depth);
}

static int depth_arguments(const struct printf_info *info, size_t n, int *types, int *size)
{
    (void)info;
    (void)size;
    if (n > 0)
        types[0] = PA_INT;
    return 1;
}

/* a format the compiler does not check (%D is ours) */
static const char *volatile depth_format = "depth %D";

__attribute__((noinline)) void descend(int depth)
{
    if (depth <= 0) {
        spin(2000 + next_random() % 30000);
        __atomic_fetch_add(&busy_work, 1, __ATOMIC_RELAXED);
        if (nap > 0) {
            struct timespec time = {0, nap * 1000};
            nanosleep(&time, NULL);
        }
        return;
    }
    switch (next_random() % 3) {
    case 0: {
        int values[5] = {4, 1, 3, 0, 2};
        pending_depth = depth;
        qsort(values, 5, sizeof values[0], compare);
        sink += values[0];
        break;
    }
    case 1: {
        char text[32];
        snprintf(text, sizeof text, depth_format, depth);
        sink += text[0];
        break;
    }
    default:
        descend(depth - 1);
        break;
    }
    __asm__ volatile("" ::: "memory"); /* not a tail call */
}

static void on_signal(int number)
{
    (void)number;
    descend(next_random() % 4);
}

static void *worker(void *argument)
{
    seed = (unsigned int)(long)argument * 2654435761u + 1;
    pthread_barrier_wait(&started);
    for (;;)
        descend(1 + next_random() % 24);
    return NULL;
}

static void *loader(void *argument)
{
    (void)argument;
    seed = 12345;
    pthread_barrier_wait(&started);
    for (;;) {
        void *handle = dlopen(library, RTLD_NOW | RTLD_LOCAL);
        if (!handle) {
            fprintf(stderr, "%s\n", dlerror());
            exit(1);
        }
        void (*through)(void (*)(int), int) =
            (void (*)(void (*)(int), int))dlsym(handle, "library_descend");
        through(descend, 1 + next_random() % 12);
        dlclose(handle);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int workers = argc > 1 ? atoi(argv[1]) : 3;
    library = argc > 2 && strcmp(argv[2], "-") ? argv[2] : NULL;
    nap = argc > 3 ? atol(argv[3]) : 0;
    pthread_t thread;
    char name[16];
    struct sigaction action = {.sa_handler = on_signal, .sa_flags = SA_RESTART};
    sigaction(SIGUSR1, &action, NULL);
    register_printf_specifier('D', print_depth, depth_arguments);
    seed = 7;
    pthread_t *threads = calloc((size_t)workers, sizeof *threads);
    pthread_barrier_init(&started, NULL, (unsigned int)workers + 1 + (library != NULL));
    for (long i = 0; i < workers; i++) {
        pthread_create(&threads[i], NULL, worker, (void *)i);
        snprintf(name, sizeof name, "busy-%ld", i);
        pthread_setname_np(threads[i], name);
    }
    if (library) {
        pthread_create(&thread, NULL, loader, NULL);
        pthread_setname_np(thread, "loader");
    }
    pthread_barrier_wait(&started);
    printf("ready\n");
    fflush(stdout);
    for (unsigned long round = 0;; round++) {
        descend(1 + next_random() % 8);
        if (workers > 0)
            pthread_kill(threads[round % (unsigned long)workers], SIGUSR1);
    }
}
