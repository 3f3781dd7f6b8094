/* A core handler's time as the kernel sees it: run by the kernel in its
   place (core_pattern "|handler_timer LAUNCHER ARGS..."), it runs LAUNCHER
   ARGS... with the core on its standard input, lets go of the pipe itself
   (so that the handler's letting go of it ends the dump, as it would
   alone), waits for it, and appends to LAUNCHER.times one line: the boot
   clock's nanoseconds at its own start and at the handler's exit, and
   the handler's peak resident KiB (wait4's ru_maxrss). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long long now_ns(void)
{
    struct timespec now;
    clock_gettime(CLOCK_BOOTTIME, &now);
    return now.tv_sec * 1000000000LL + now.tv_nsec;
}

int main(int argc, char **argv)
{
    long long started = now_ns();
    if (argc < 2)
        return 2;
    pid_t child = fork();
    if (child < 0)
        return 1;
    if (child == 0) {
        execv(argv[1], argv + 1);
        _exit(127);
    }
    close(STDIN_FILENO);
    int status;
    struct rusage usage;
    if (wait4(child, &status, 0, &usage) != child)
        return 1;
    long long ended = now_ns();
    char path[4096];
    if (snprintf(path, sizeof path, "%s.times", argv[1]) >= (int)sizeof path)
        return 1;
    int out = open(path, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (out < 0)
        return 1;
    dprintf(out, "%lld %lld %ld %d\n", started, ended, usage.ru_maxrss, status);
    close(out);
    return 0;
}
