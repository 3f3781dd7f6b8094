/* Nine threads: main and eight named workers, a few calls deep.  Workers
 * 0 .. BUSY-1 compute (counting their work), the others wait: in
 * nanosleep, on a condition variable, in poll or in read.  Prints "ready"
 * once every worker runs; with SECONDS > 0, reads a line from stdin, then
 * exits SECONDS later, printing the work done meanwhile; with SECONDS < 0,
 * prints the work done so far for each line read from stdin, and exits at
 * its end.
 * Usage: workers [BUSY [SECONDS]] */
#define _GNU_SOURCE
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define WORKERS 8

static pthread_barrier_t started;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t never = PTHREAD_COND_INITIALIZER;
static int busy;
static int pipe_ends[2];
static volatile unsigned long work[WORKERS];

__attribute__((noinline)) unsigned long mix(unsigned long x)
{
    for (int i = 0; i < 64; i++)
        x = x * 6364136223846793005UL + 1442695040888963407UL;
    return x;
}

__attribute__((noinline)) void compute(int id)
{
    unsigned long x = id;
    for (;;) {
        x = mix(x);
        work[id]++;
    }
}

__attribute__((noinline)) void wait_for_nothing(int id)
{
    struct timespec long_time = {1000, 0};
    struct pollfd fd = {pipe_ends[0], POLLIN, 0};
    char byte;
    for (;;) {
        switch (id % 4) {
        case 0: nanosleep(&long_time, NULL); break;
        case 1:
            pthread_mutex_lock(&lock);
            pthread_cond_wait(&never, &lock);
            pthread_mutex_unlock(&lock);
            break;
        case 2: poll(&fd, 1, -1); break;
        default: if (read(pipe_ends[0], &byte, 1) <= 0) pause(); break;
        }
    }
}

__attribute__((noinline)) void work_at(int id, int depth)
{
    if (depth > 0) {
        work_at(id, depth - 1);
        __asm__ volatile("" ::: "memory");
        return;
    }
    pthread_barrier_wait(&started);
    if (id < busy)
        compute(id);
    else
        wait_for_nothing(id);
}

static unsigned long total_work(void)
{
    unsigned long total = 0;
    for (int i = 0; i < WORKERS; i++)
        total += work[i];
    return total;
}

static void *worker(void *arg)
{
    long id = (long)arg;
    char name[16];
    snprintf(name, sizeof name, "%s-%ld", id < busy ? "busy" : "wait", id);
    pthread_setname_np(pthread_self(), name);
    work_at((int)id, (int)id % 2 + 1);
    return NULL;
}

int main(int argc, char **argv)
{
    pthread_t threads[WORKERS];
    busy = argc > 1 ? atoi(argv[1]) : 0;
    int seconds = argc > 2 ? atoi(argv[2]) : 0;
    if (pipe(pipe_ends))
        return 1;
    pthread_barrier_init(&started, NULL, WORKERS + 1);
    for (long i = 0; i < WORKERS; i++)
        pthread_create(&threads[i], NULL, worker, (void *)i);
    pthread_barrier_wait(&started);
    printf("ready\n");
    fflush(stdout);
    char line[8];
    if (seconds < 0) {
        while (fgets(line, sizeof line, stdin)) {
            printf("work %lu\n", total_work());
            fflush(stdout);
        }
        return 0;
    }
    if (seconds == 0)
        for (;;)
            pause();
    /* the timed run starts at a line on stdin (or its end) */
    if (!fgets(line, sizeof line, stdin))
        line[0] = 0;
    unsigned long before = total_work();
    sleep(seconds);
    printf("work %lu\n", total_work() - before);
    return 0;
}
