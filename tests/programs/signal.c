/* A signal handler whose signal interrupted user code (a division by zero). */
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

volatile int zero;

__attribute__((noinline)) void stop_here(void) { __asm__ volatile("" ::: "memory"); }

static void handler(int signo)
{
    stop_here();
    _exit(signo);
}

__attribute__((noinline)) int divide(int a, int b) { return a / b; }

__attribute__((noinline)) int compute(int n)
{
    return divide(n * 3, zero) + n;
}

int main(void)
{
    struct sigaction action = {0};
    action.sa_handler = handler;
    sigaction(SIGFPE, &action, NULL);
    return compute(7);
}
