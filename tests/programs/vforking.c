/* One thread waits in vfork (its child sleeps before it exits) while two
   others wait in a join and a sleep; prints "ready" once the child runs.
   argv[1]: how long the child sleeps, in seconds (60 by default). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static unsigned child_sleeps = 60;
static int ready[2];

__attribute__((noinline)) static void *vforking(void *arg)
{
    pid_t child = vfork();
    if (child == 0) {
        /* the parent's memory, borrowed: only write() and _exit() */
        write(ready[1], "r", 1);
        sleep(child_sleeps);
        _exit(0);
    }
    waitpid(child, NULL, 0);
    return arg;
}

__attribute__((noinline)) static void *sleeping(void *arg)
{
    for (;;)
        sleep(1000);
    return arg;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        child_sleeps = (unsigned)atoi(argv[1]);
    pthread_t sleeper, vforker;
    char byte;
    if (pipe(ready) != 0)
        return 1;
    pthread_create(&sleeper, NULL, sleeping, NULL);
    pthread_create(&vforker, NULL, vforking, NULL);
    if (read(ready[0], &byte, 1) != 1)
        return 1;
    puts("ready");
    fflush(stdout);
    pthread_join(vforker, NULL);
    return 0;
}
