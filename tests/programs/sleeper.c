/* Waits to be attached to, a few calls deep. */
#include <stdio.h>
#include <unistd.h>

__attribute__((noinline)) void wait_forever(void)
{
    printf("ready\n");
    fflush(stdout);
    for (;;)
        pause();
}

__attribute__((noinline)) void middle(int n)
{
    if (n > 0)
        middle(n - 1);
    else
        wait_forever();
    __asm__ volatile("" ::: "memory");
}

int main(void)
{
    middle(3);
    return 0;
}
