/* A busy loop of system calls (getppid, which does little in the kernel
 * and much on the way in and out), for the kernel frames of perf events'
 * samples.  Prints "ready", then calls until killed. */
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

__attribute__((noinline)) static void ask_kernel(void)
{
    for (int i = 0; i < 1000; i++)
        syscall(SYS_getppid);
}

int main(void)
{
    puts("ready");
    fflush(stdout);
    for (;;)
        ask_kernel();
}
