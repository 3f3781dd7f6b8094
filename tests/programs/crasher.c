/* Crashes as asked (argv[1]): segv, abort, bus, fpe, handler (a SIGSEGV
   inside a SIGUSR1 handler), threads (one of 10 threads crashes while the
   others wait, each parked in pause() before it crashes: the same stacks
   every run), lib (in a library's function: crasher_lib.c), big
   (10 threads and 2 GB of touched memory, then segv), later (segv once
   a line is read from stdin), many N (N threads waiting, then segv),
   deep MB (segv in a thread MB megabytes of stack deep, in frames of
   64 KiB), deepmain MB (the same on the main thread), split (segv in a
   thread 6 frames of 64 KiB deep in a stack of two mappings, its top
   256 KiB a mapping of its own: the crash in the lower one), maps N (segv with N more mappings), names (segv in a thread
   whose name, and its process's, are not UTF-8).  Each crash is a few
   calls deep.  Prints "ready" first. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
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

#define DEEP_FRAME (64 << 10)

/* Recursion of `depth` frames of DEEP_FRAME bytes each, every one touched. */
__attribute__((noinline)) static void deep(long depth)
{
    volatile char frame[DEEP_FRAME - 256];
    memset((char *)frame, (int)depth, sizeof frame);
    if (depth > 0)
        deep(depth - 1);
    else
        segv(3);
    sink += frame[depth % sizeof frame];
}

static void *deep_thread(void *argument)
{
    deep((long)argument);
    return NULL;
}

static void *named_thread(void *argument)
{
    (void)argument;
    prctl(PR_SET_NAME, "w\xff\x1b[31m\n");
    until_parked(1);
    segv(3);
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
    } else if (!strcmp(mode, "deep") && argc > 2) {
        size_t megabytes = (size_t)atol(argv[2]);
        pthread_attr_t huge;
        pthread_t thread;
        pthread_attr_init(&huge);
        pthread_attr_setstacksize(&huge, (megabytes + 64) << 20);
        pthread_create(&thread, &huge, deep_thread, (void *)(megabytes * 16));
        pthread_join(thread, NULL);
    } else if (!strcmp(mode, "split")) {
        size_t size = 1 << 20, top = 256 << 10;
        char *stack = mmap(NULL, size, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
        pthread_attr_t split;
        pthread_t thread;
        if (stack == MAP_FAILED || madvise(stack + size - top, top, MADV_DONTFORK))
            return 2; /* MADV_DONTFORK: a flag of its own, so a mapping of its own */
        pthread_attr_init(&split);
        pthread_attr_setstack(&split, stack, size);
        pthread_create(&thread, &split, deep_thread, (void *)5L);
        pthread_join(thread, NULL);
    } else if (!strcmp(mode, "deepmain") && argc > 2) {
        deep(atol(argv[2]) * 16); /* on the main thread: ulimit -s must allow it */
    } else if (!strcmp(mode, "maps") && argc > 2) {
        long count = atol(argv[2]);
        char *pages = mmap(NULL, count * 4096L, PROT_NONE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (pages == MAP_FAILED)
            return 2;
        for (long i = 1; i < count; i += 2) /* every other page: a mapping each */
            if (mprotect(pages + i * 4096L, 4096, PROT_READ))
                return 3;
        segv(3);
    } else if (!strcmp(mode, "names")) {
        pthread_t thread;
        prctl(PR_SET_NAME, "m\xfe\x1b[31m");
        pthread_create(&thread, NULL, named_thread, NULL);
        waiting();
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
