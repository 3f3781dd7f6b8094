/* Reads the clock in a loop for SECONDS (default 1), through the C
 * library into the vDSO (no system call): the vDSO's frames of perf
 * events' samples.  Usage: clock_loop [SECONDS] */
#include <stdlib.h>
#include <time.h>

static volatile long sink;

__attribute__((noinline)) static void read_clock(void)
{
    struct timespec now;
    for (int i = 0; i < 1000; i++) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        sink += now.tv_nsec;
    }
}

int main(int argc, char **argv)
{
    struct timespec end, now;
    clock_gettime(CLOCK_MONOTONIC, &end);
    end.tv_sec += argc > 1 ? atoi(argv[1]) : 1;
    do {
        read_clock();
        clock_gettime(CLOCK_MONOTONIC, &now);
    } while (now.tv_sec < end.tv_sec ||
             (now.tv_sec == end.tv_sec && now.tv_nsec < end.tv_nsec));
    return 0;
}
