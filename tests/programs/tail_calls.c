/* Tail calls GDB rebuilds frames for (tests/test_tail_calls.py): a chain
 * of two (outer jumps to middle, middle to inner); a chain whose first
 * calls are ambiguous (choose jumps to left or right, both jump to shared,
 * which jumps to inner): GDB shows shared alone; and qsort, the C
 * library's tail call to __qsort_r (with the library's DWARF, libc6-dbg).
 * With an argument, stop_here prints "ready" and waits in pause() at its
 * first call. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))
volatile int sink;
static int waiting;

NOINLINE void stop_here(int value)
{
    sink = value;
    if (waiting) {
        puts("ready");
        fflush(stdout);
        for (;;)
            pause();
    }
    __asm__ volatile("" ::: "memory");
}
NOINLINE int inner(int x) { stop_here(x); return x * 3; }
NOINLINE int middle(int x) { return inner(x + 1); }
NOINLINE int outer(int x) { return middle(x * 2); }
NOINLINE int shared(int x) { return inner(x - 1); }
NOINLINE int left(int x) { return shared(x + 5); }
NOINLINE int right(int x) { return shared(x + 7); }
NOINLINE int choose(int x) { if (x & 1) return left(x); return right(x ^ 2); }

static int compare(const void *a, const void *b)
{
    stop_here(*(const int *)a);
    return *(const int *)a - *(const int *)b;
}

int main(int argc, char **argv)
{
    (void)argv;
    int values[] = {3, 1, 2};
    waiting = argc > 1;
    int total = outer(argc) + choose(argc);
    qsort(values, 3, sizeof values[0], compare);
    return total + values[0] == 0;
}
