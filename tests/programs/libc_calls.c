/* Stops inside libc for sframe-bt to walk through, chosen by argv[1]:
 *   qsort   a qsort comparator (libc's msort between main and the comparator)
 *   thread  a thread's function (start_thread and clone3 below it)
 *   abort   abort() from nested calls (SIGABRT raised inside libc)
 *   write   a write(2) from nested calls (`catch syscall write`)
 *   segv    a fault in user code whose handler calls write(2)
 */
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

volatile int *volatile nowhere;
static volatile int sink;

__attribute__((noinline)) void stop_here(void) { __asm__ volatile("" ::: "memory"); }

static int compare(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    if (x == 7 || y == 7)
        stop_here();
    return (x > y) - (x < y);
}

__attribute__((noinline)) static void sort_some(void)
{
    int values[16] = {9, 3, 14, 1, 7, 12, 5, 0, 11, 2, 15, 8, 4, 13, 6, 10};
    qsort(values, 16, sizeof values[0], compare);
    sink = values[3];
}

__attribute__((noinline)) static int thread_inner(int depth)
{
    if (depth > 0)
        return thread_inner(depth - 1) + sink;
    stop_here();
    return sink;
}

static void *worker(void *arg)
{
    return (void *)(long)thread_inner((int)(long)arg);
}

__attribute__((noinline)) static void start_worker(void)
{
    pthread_t thread;
    pthread_create(&thread, NULL, worker, (void *)3L);
    pthread_join(thread, NULL);
}

__attribute__((noinline)) static void give_up(int depth)
{
    if (depth > 0)
        give_up(depth - 1);
    else
        abort();
    sink++;
}

__attribute__((noinline)) static void say(int depth)
{
    static const char text[] = "hello from say\n";
    if (depth > 0)
        say(depth - 1);
    else
        write(1, text, sizeof text - 1);
    sink++;
}

static void on_fault(int signo)
{
    static const char text[] = "fault\n";
    write(2, text, sizeof text - 1);
    _exit(signo);
}

__attribute__((noinline)) static void fault(int depth)
{
    if (depth > 0)
        fault(depth - 1);
    else
        *nowhere = 1;
    sink++;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "qsort";
    if (!strcmp(mode, "qsort"))
        sort_some();
    else if (!strcmp(mode, "thread"))
        start_worker();
    else if (!strcmp(mode, "abort"))
        give_up(3);
    else if (!strcmp(mode, "write"))
        say(3);
    else if (!strcmp(mode, "segv")) {
        struct sigaction action = {0};
        action.sa_handler = on_fault;
        sigaction(SIGSEGV, &action, NULL);
        fault(3);
    }
    return 0;
}
