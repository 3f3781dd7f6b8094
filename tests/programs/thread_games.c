/* Threads that are hard to sample, for bench/fuzz_threads.py:
     thread_games MODE SECONDS [N]
   churn   make and end threads without pause, N at a time
   burst   N threads that exit as soon as they start, again and again
   vfork   N threads, one waiting in vfork while its child sleeps SECONDS
   exec    N threads, one of which execs sleep (the others end with it)
   zombie  the main thread exits, N others run on
   Prints "ready" once the game is under way; ends after about SECONDS. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double seconds;
static int count;
static int ready_pipe[2];

static double elapsed(const struct timespec *start)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return now.tv_sec - start->tv_sec + (now.tv_nsec - start->tv_nsec) / 1e9;
}

static void say_ready(void)
{
    puts("ready");
    fflush(stdout);
}

__attribute__((noinline)) static void *brief(void *arg)
{
    volatile long spin = 0;
    for (int i = 0; i < (long)arg; i++)
        spin += i;
    return arg;
}

__attribute__((noinline)) static void *lasting(void *arg)
{
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    while (elapsed(&start) < seconds)
        usleep(1000 * (1 + (long)arg % 7));
    return arg;
}

__attribute__((noinline)) static void *vforking(void *arg)
{
    pid_t child = vfork();
    if (child == 0) {
        write(ready_pipe[1], "r", 1);
        usleep((useconds_t)(seconds * 1e6));
        _exit(0);
    }
    waitpid(child, NULL, 0);
    return arg;
}

__attribute__((noinline)) static void *execing(void *arg)
{
    char duration[32];
    usleep(20000);
    snprintf(duration, sizeof duration, "%g", seconds);
    execlp("sleep", "sleep", duration, (char *)NULL);
    return arg;
}

static void make_and_end(int at_once, long work, int usleep_first)
{
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    pthread_t threads[64];
    int said = 0;
    do {
        for (int i = 0; i < at_once; i++)
            pthread_create(&threads[i], NULL, brief, (void *)work);
        for (int i = 0; i < at_once; i++)
            pthread_join(threads[i], NULL);
        if (!said++)
            say_ready();
        if (usleep_first)
            usleep(usleep_first);
    } while (elapsed(&start) < seconds);
}

static void start_lasting(int n)
{
    pthread_t thread;
    for (long i = 0; i < n; i++)
        pthread_create(&thread, NULL, lasting, (void *)i);
}

int main(int argc, char **argv)
{
    if (argc < 3)
        return 2;
    seconds = atof(argv[2]);
    count = argc > 3 ? atoi(argv[3]) : 4;
    if (count < 1 || count > 64)
        count = 4;
    const char *mode = argv[1];
    if (!strcmp(mode, "churn")) {
        make_and_end(count, 1000, 0);
    } else if (!strcmp(mode, "burst")) {
        make_and_end(count, 0, 100);
    } else if (!strcmp(mode, "vfork")) {
        pthread_t thread;
        char byte;
        if (pipe(ready_pipe) != 0)
            return 1;
        start_lasting(count - 1);
        pthread_create(&thread, NULL, vforking, NULL);
        if (read(ready_pipe[0], &byte, 1) != 1)
            return 1;
        say_ready();
        pthread_join(thread, NULL);
    } else if (!strcmp(mode, "exec")) {
        pthread_t thread;
        start_lasting(count - 1);
        pthread_create(&thread, NULL, execing, NULL);
        say_ready();
        pthread_join(thread, NULL);
    } else if (!strcmp(mode, "zombie")) {
        start_lasting(count);
        say_ready();
        pthread_exit(NULL);
    } else {
        return 2;
    }
    return 0;
}
