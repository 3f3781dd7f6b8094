/* Calls inlined three deep (forced), some from two sites, around a call
   that waits to be attached to (unless a second argument says not to):
   the inline frames of sfbt's tests. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

volatile int sink;
static int waiting = 1;

__attribute__((noinline)) void wait_forever(int n)
{
    sink = n;
    if (!waiting)
        return;
    printf("ready\n");
    fflush(stdout);
    for (;;)
        pause();
}

static inline __attribute__((always_inline)) int leaf(int n)
{
    sink += n * 3;
    if (n > 100)
        wait_forever(n);
    return sink ^ n;
}

static inline __attribute__((always_inline)) int inner(int n)
{
    int a = leaf(n + 1);
    sink += a;
    return leaf(a & 0xff) + 1;
}

static inline __attribute__((always_inline)) int outer(int n)
{
    int total = 0;
    for (int i = 0; i < n; i++)
        total += inner(i * 7 + n);
    return total + inner(n);
}

__attribute__((noinline)) int work(int n)
{
    return outer(n) + leaf(n - 1);
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 3;
    waiting = argc <= 2;
    int result = work(n);
    printf("%d\n", result + outer(n + 200));
    return 0;
}
