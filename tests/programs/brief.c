/* A process that lives a moment: it computes for MILLISECONDS of its
 * processor time (in brief_work, through a library call) and exits.
 * Usage: brief MILLISECONDS */
#include <stdlib.h>
#include <string.h>
#include <time.h>

static volatile unsigned long sink;

__attribute__((noinline)) static void brief_work(double seconds)
{
    struct timespec now;
    char text[64] = "";
    do {
        for (int i = 0; i < 1000; i++) {
            memset(text, 'a' + i % 26, sizeof text - 1 - i % 8);
            sink += strlen(text);
        }
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
    } while (now.tv_sec + now.tv_nsec / 1e9 < seconds);
}

int main(int argc, char **argv)
{
    brief_work(argc > 1 ? atoi(argv[1]) / 1000.0 : 0.05);
    return 0;
}
