/* Crashes as asked (argv[1]): segv, abort, bus, fpe, handler (a SIGSEGV
   inside a SIGUSR1 handler), threads (one of 10 threads crashes while the
   others wait, each parked in pause() before it crashes: the same stacks
   every run), lib (in a library's function: crasher_lib.c), big
   (10 threads and 2 GB of touched memory, then segv), later (segv once
   a line is read from stdin), many N (N threads waiting, then segv).  Each crash is a
   few calls deep.  Prints "ready" first. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <dirent.h>
#include <unistd.h>

extern void crasher_lib_apply(void (*fn)(int), int depth);

static volatile int sink;
static pthread_barrier_t ready;

__attribute__((noinline)) static void segv(int depth)
{
    if (depth > 0) {
        segv(depth - 1);
        sink++;
        return;
    }
    *(volatile int *)(long)sink = 1;
}

__attribute__((noinline)) static void fpe(int depth)
{
    if (depth > 0) {
        fpe(depth - 1);
        sink++;
        return;
    }
    sink = 7 / sink;
}

__attribute__((noinline)) static void bus(int depth)
{
    if (depth > 0) {
        bus(depth - 1);
        sink++;
        return;
    }
    int fd = fileno(tmpfile()); /* empty */
    volatile char *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    page[0] = 1; /* past the end of an empty file: SIGBUS */
}

__attribute__((noinline)) static void aborting(int depth)
{
    if (depth > 0) {
        aborting(depth - 1);
        sink++;
        return;
    }
    abort();
}

static void on_usr1(int number)
{
    (void)number;
    segv(2);
}

static int parked; /* threads come to waiting() */
/* pause() bound when the program is loaded (no lazy binding, whose lock a
   thread may sleep on, on its first call) */
static int (*volatile park)(void) = pause;

__attribute__((noinline)) static void waiting(void)
{
    __atomic_add_fetch(&parked, 1, __ATOMIC_SEQ_CST);
    for (;;)
        park();
}

/* Until `others` threads have come to waiting() and every thread but this
   one sleeps (in pause(): all a thread does once it has come there). */
static void until_parked(int others)
{
    while (__atomic_load_n(&parked, __ATOMIC_SEQ_CST) < others)
        usleep(1000);
    for (;;) {
        int sleeping = 0;
        DIR *tasks = opendir("/proc/self/task");
        struct dirent *task;
        while (tasks && (task = readdir(tasks))) {
            char path[300], stat[512];
            if (task->d_name[0] == '.' || atol(task->d_name) == syscall(SYS_gettid))
                continue;
            snprintf(path, sizeof path, "/proc/self/task/%s/stat", task->d_name);
            FILE *file = fopen(path, "r");
            size_t size = file ? fread(stat, 1, sizeof stat - 1, file) : 0;
            if (file)
                fclose(file);
            stat[size] = 0;
            char *state = strrchr(stat, ')');
            sleeping += state && state[1] == ' ' && state[2] == 'S';
        }
        if (tasks)
            closedir(tasks);
        if (sleeping == others)
            return;
        usleep(1000);
    }
}

static void *worker(void *argument)
{
    pthread_barrier_wait(&ready);
    if (argument) {
        until_parked(10);
        segv(3);
    }
    waiting();
    return NULL;
}

static char *volatile touched; /* keeps the memory (and its memset) */

static void *toucher(void *argument)
{
    size_t size = (size_t)argument;
    char *memory = malloc(size);
    memset(memory, 1, size);
    touched = memory;
    pthread_barrier_wait(&ready);
    waiting();
    return NULL;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "segv";
    printf("ready\n");
    fflush(stdout);
    if (!strcmp(mode, "segv"))
        segv(3);
    else if (!strcmp(mode, "abort"))
        aborting(3);
    else if (!strcmp(mode, "bus"))
        bus(3);
    else if (!strcmp(mode, "fpe"))
        fpe(3);
    else if (!strcmp(mode, "handler")) {
        signal(SIGUSR1, on_usr1);
        raise(SIGUSR1);
    } else if (!strcmp(mode, "later")) {
        char line[16];
        if (fgets(line, sizeof line, stdin))
            segv(3);
    } else if (!strcmp(mode, "many") && argc > 2) {
        long count = atol(argv[2]);
        pthread_attr_t small;
        pthread_attr_init(&small);
        pthread_attr_setstacksize(&small, 64 << 10);
        pthread_barrier_init(&ready, NULL, count + 1);
        for (long i = 0; i < count; i++) {
            pthread_t thread;
            pthread_create(&thread, &small, worker, NULL);
        }
        pthread_barrier_wait(&ready);
        segv(3);
    } else if (!strcmp(mode, "lib"))
        crasher_lib_apply(segv, 2);
    else if (!strcmp(mode, "threads") || !strcmp(mode, "big")) {
        int big = !strcmp(mode, "big");
        pthread_t threads[10];
        pthread_barrier_init(&ready, NULL, 11);
        for (long i = 0; i < 10; i++)
            pthread_create(&threads[i], NULL, big ? toucher : worker,
                           big ? (void *)(((size_t)2 << 30) / 10) : (void *)(long)(i == 6));
        pthread_barrier_wait(&ready);
        if (big)
            segv(3);
        waiting();
    }
    return 1;
}
