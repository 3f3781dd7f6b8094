/* Makes and ends threads as fast as it can, a few at a time, for
   argv[1] seconds (10 by default); prints "ready" once the first ran. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define AT_ONCE 4

__attribute__((noinline)) static void *short_lived(void *arg)
{
    volatile long spin = 0;
    for (int i = 0; i < 1000; i++)
        spin += i;
    usleep(1000);  /* long enough to be sampled now and then */
    return arg;
}

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 10.0;
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    int said = 0;
    do {
        pthread_t threads[AT_ONCE];
        for (int i = 0; i < AT_ONCE; i++)
            pthread_create(&threads[i], NULL, short_lived, NULL);
        for (int i = 0; i < AT_ONCE; i++)
            pthread_join(threads[i], NULL);
        if (!said) {
            puts("ready");
            fflush(stdout);
            said = 1;
        }
        clock_gettime(CLOCK_MONOTONIC, &now);
    } while (now.tv_sec - start.tv_sec + (now.tv_nsec - start.tv_nsec) / 1e9 < seconds);
    return 0;
}
