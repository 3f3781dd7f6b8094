/* A thread that blocks in one place, then, woken once, moves on and
   blocks in another: `sfbt record` must not count it where it was
   (tests/test_record.py).  The thread prints "ready" and the descriptor
   that wakes it; once it moved on it writes a byte to standard output.
   The main thread waits for it to end. */
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

static int wake[2];

__attribute__((noinline)) void moved_on(void)
{
    write(1, "m", 1);
    for (;;)
        pause();
}

__attribute__((noinline)) void waiting(void)
{
    char byte;
    if (read(wake[0], &byte, 1) == 1)
        moved_on();
}

static void *worker(void *arg)
{
    (void)arg;
    printf("ready %d\n", wake[1]);
    fflush(stdout);
    waiting();
    return NULL;
}

int main(void)
{
    pthread_t thread;
    if (pipe(wake) != 0 || pthread_create(&thread, NULL, worker, NULL) != 0)
        return 1;
    return pthread_join(thread, NULL);
}
