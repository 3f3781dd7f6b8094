/* A deterministic workload for the differential harness
 * (tests/differential.py): a tail call (mid jumps to leaf at -O2),
 * arguments kept in callee-saved registers across calls (keeper), a
 * signal raised inside libc (raise) and one raised by user code whose
 * handler returns into it (ud2, SIGILL), a qsort comparator called from
 * libc, calls through the PLT, the vDSO (clock_gettime) and stdio.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

volatile int sink;

NOINLINE int leaf(int x)
{
    sink += x;
    return x * 2 + sink % 3;
}

NOINLINE int mid(int x)
{
    sink ^= x;
    return leaf(x + 1);
}

NOINLINE int keeper(int base, int n)
{
    int total = 0;
    for (int i = 0; i < n; i++)
        total += mid(base + i);
    return total + base;
}

NOINLINE int depth(int n)
{
    if (n == 0)
        return keeper(n + 7, 2);
    return depth(n - 1) + sink % 5;
}

static void on_usr1(int signo)
{
    static const char text[] = "usr1\n";
    write(1, text, sizeof text - 1);
    sink += signo;
}

static void on_ill(int signo, siginfo_t *info, void *context)
{
    ucontext_t *uc = context;
    (void)info;
    uc->uc_mcontext.gregs[REG_RIP] += 2; /* past the ud2 */
    sink += signo + leaf(signo);
}

NOINLINE int trap_here(int x)
{
    sink = x;
    __asm__ volatile("ud2" ::: "memory");
    return sink + 1;
}

static int compare(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    sink += x;
    return (x > y) - (x < y);
}

NOINLINE int sort_some(void)
{
    int values[12] = {9, 3, 11, 1, 7, 0, 5, 10, 2, 8, 4, 6};
    qsort(values, 12, sizeof values[0], compare);
    return values[4];
}

int main(void)
{
    struct sigaction usr1 = {0}, ill = {0};
    usr1.sa_handler = on_usr1;
    sigaction(SIGUSR1, &usr1, NULL);
    ill.sa_sigaction = on_ill;
    ill.sa_flags = SA_SIGINFO;
    sigaction(SIGILL, &ill, NULL);

    int r = keeper(42, 5) + depth(6);
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now); /* the vDSO; the time is not used */
    raise(SIGUSR1);
    r += trap_here(r);
    r += sort_some();
    char text[64];
    snprintf(text, sizeof text, "result %d", r);
    puts(text);
    printf("%zu\n", strlen(text));
    return r & 0x7f;
}
