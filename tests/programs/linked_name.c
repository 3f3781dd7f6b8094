/* dlopen's the library named by argv[1] (through a linked directory, in
   tests/test_library_names.py) and spins in it; with "vdso", spins in
   clock_gettime (the vDSO's) instead.  Says "ready" once it spins. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    if (strcmp(argv[1], "vdso") == 0) {
        struct timespec now;
        puts("ready");
        fflush(stdout);
        for (;;)
            clock_gettime(CLOCK_MONOTONIC, &now);
    }
    void *library = dlopen(argv[1], RTLD_NOW);
    if (!library) {
        fprintf(stderr, "%s\n", dlerror());
        return 1;
    }
    void (*spin)(void) = (void (*)(void))dlsym(library, "linked_spin");
    puts("ready");
    fflush(stdout);
    spin();
    return 0;
}
