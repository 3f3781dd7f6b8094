/* Waits to be attached to inside a signal handler: the signal (a division
   by zero) interrupted user code a few calls deep; its handler prints
   "ready" and waits there. */
#include <signal.h>
#include <unistd.h>

volatile int zero;

__attribute__((noinline)) void wait_in_handler(void)
{
    static const char ready[] = "ready\n";
    if (write(STDOUT_FILENO, ready, sizeof ready - 1) < 0)
        _exit(1);
    for (;;)
        pause();
}

static void handler(int signo)
{
    (void)signo;
    wait_in_handler();
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
