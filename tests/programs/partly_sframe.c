/* A program only partly covered by .sframe (tests/test_partly_sframe.py):
 * this file is assembled with --gsframe, partly_sframe_middle.c without,
 * so middle() has CFI in .eh_frame but no SFrame entry.  main and two
 * threads each call middle -> innermost, which waits in pause(); built
 * static too, where libc's objects have no SFrame either.  Prints "ready"
 * once every thread waits.
 */
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

int middle(int depth);


NOINLINE int innermost(int depth)
{
    static pthread_mutex_t once = PTHREAD_MUTEX_INITIALIZER;
    static int waiting;
    pthread_mutex_lock(&once);
    if (++waiting == 3) {
        puts("ready");
        fflush(stdout);
    }
    pthread_mutex_unlock(&once);
    for (;;)
        pause();
    return depth;
}

static void *thread_main(void *argument)
{
    return (void *)(long)middle((int)(long)argument);
}

int main(void)
{
    pthread_t threads[2];
    for (long i = 0; i < 2; i++)
        pthread_create(&threads[i], NULL, thread_main, (void *)(i + 1));
    return middle(0);
}
