/* Loads a library only once a tracer seized it, or with FILE once FILE
 * exists (a recorder on perf events seizes nothing), and 200 ms more: a
 * recorder's first reading of the mappings has no such library, and the
 * thread then stays inside it for good (liblate.c's library_spin, called
 * from main).  Prints "ready" before it waits.
 * Usage: late_library LIBRARY [FILE] (liblate.so) */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int traced(void)
{
    char line[256];
    int tracer = 0;
    FILE *status = fopen("/proc/self/status", "r");
    if (!status)
        return 0;
    while (fgets(line, sizeof line, status))
        if (strncmp(line, "TracerPid:", 10) == 0)
            tracer = atoi(line + 10);
    fclose(status);
    return tracer != 0;
}

int main(int argc, char **argv)
{
    struct timespec pause = {0, 10 * 1000 * 1000};
    if (argc < 2)
        return 2;
    printf("ready\n");
    fflush(stdout);
    while (argc > 2 ? access(argv[2], F_OK) != 0 : !traced())
        nanosleep(&pause, NULL);
    pause.tv_nsec = 200 * 1000 * 1000;
    nanosleep(&pause, NULL);
    void *handle = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        fprintf(stderr, "%s\n", dlerror());
        return 1;
    }
    void (*spin)(void) = (void (*)(void))dlsym(handle, "library_spin");
    spin();
    return 0;
}
