/* The stops of issue 11's table that the SFrame walk must survive, one per
   argument: sigreturn (a handler returns: `catch syscall rt_sigreturn`),
   vdso (clock_gettime in the vDSO), lazy (the first call of a function
   through the PLT: the lazy-binding resolver), clone3 (a thread is created:
   `catch syscall clone3`), ra0 (a return address overwritten with 0) and
   loop (two signal frames whose saved stack pointers lead to each other). */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

__attribute__((noinline)) void stop_here(void) { __asm__ volatile("" ::: "memory"); }

static void on_signal(int signo) { (void)signo; }

__attribute__((noinline)) static void sigreturn_case(void)
{
    signal(SIGUSR1, on_signal);
    raise(SIGUSR1);
}

__attribute__((noinline)) static long vdso_case(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return now.tv_nsec;
}

__attribute__((noinline)) static void lazy_case(void)
{
    /* strdup is called nowhere else: its PLT slot is bound here */
    char *copy = strdup("lazy");
    free(copy);
}

static void *thread_main(void *arg) { return arg; }

__attribute__((noinline)) static void clone3_case(void)
{
    pthread_t thread;
    pthread_create(&thread, NULL, thread_main, NULL);
    pthread_join(thread, NULL);
}

__attribute__((noinline, optimize("no-omit-frame-pointer"))) static void smash(void)
{
    void **frame = __builtin_frame_address(0);
    frame[1] = 0;  /* the return address into ra0_case */
    stop_here();
    _exit(0);
}

__attribute__((noinline)) static void ra0_case(void) { smash(); }

static ucontext_t *first;

static void inner_handler(int signo, siginfo_t *info, void *context)
{
    (void)signo, (void)info;
    ucontext_t *second = context;
    /* the frame the first signal interrupted now "was" the trampoline of
       the second, whose frame leads back to the first */
    first->uc_mcontext.gregs[REG_RIP] = (greg_t)__builtin_return_address(0);
    first->uc_mcontext.gregs[REG_RSP] = (greg_t)second;
    stop_here();
    _exit(0);
}

static void outer_handler(int signo, siginfo_t *info, void *context)
{
    (void)signo, (void)info;
    first = context;
    raise(SIGUSR2);
}

__attribute__((noinline)) static void loop_case(void)
{
    struct sigaction action = {0};
    action.sa_flags = SA_SIGINFO | SA_NODEFER;
    action.sa_sigaction = inner_handler;
    sigaction(SIGUSR2, &action, NULL);
    action.sa_sigaction = outer_handler;
    sigaction(SIGUSR1, &action, NULL);
    raise(SIGUSR1);
}

int main(int argc, char **argv)
{
    const char *which = argc > 1 ? argv[1] : "";
    if (!strcmp(which, "sigreturn"))
        sigreturn_case();
    else if (!strcmp(which, "vdso"))
        printf("%ld\n", vdso_case());
    else if (!strcmp(which, "lazy"))
        lazy_case();
    else if (!strcmp(which, "clone3"))
        clone3_case();
    else if (!strcmp(which, "ra0"))
        ra0_case();
    else if (!strcmp(which, "loop"))
        loop_case();
    return 0;
}
