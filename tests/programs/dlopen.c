/* A library loaded with dlopen calling back into the executable. */
#include <dlfcn.h>
#include <stdio.h>

__attribute__((noinline)) void stop_here(void) { __asm__ volatile("" ::: "memory"); }

__attribute__((noinline)) int callback(int value)
{
    stop_here();
    return value + 1;
}

int main(int argc, char **argv)
{
    void *library = dlopen(argc > 1 ? argv[1] : "./libapply.so", RTLD_NOW);
    if (!library) {
        fprintf(stderr, "%s\n", dlerror());
        return 1;
    }
    int (*apply)(int (*)(int), int) = (int (*)(int (*)(int), int))dlsym(library, "lib_apply");
    return apply(callback, 3) & 0x7f;
}
