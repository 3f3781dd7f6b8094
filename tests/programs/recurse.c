/* Deep recursion, a callback through a shared library, alloca and a VLA. */
#include <alloca.h>
#include <stdlib.h>
#include <string.h>

int lib_apply(int (*callback)(int), int value);  /* libapply.so */

__attribute__((noinline)) void stop_here(void) { __asm__ volatile("" ::: "memory"); }

__attribute__((noinline)) int with_vla(int n)
{
    char buffer[n];  /* variable-length array */
    memset(buffer, n, (size_t)n);
    stop_here();
    return buffer[n / 2];
}

__attribute__((noinline)) int with_alloca(int n)
{
    char *scratch = alloca((size_t)n * 16);
    memset(scratch, 1, (size_t)n * 16);
    return with_vla(n * 3 + 1) + scratch[n];
}

__attribute__((noinline)) int callback(int value)
{
    return with_alloca(value % 7 + 1) + value;
}

__attribute__((noinline)) int recurse(int depth)
{
    volatile int keep = depth;  /* read after the calls: no loop, no tail call */
    if (depth == 0)
        return lib_apply(callback, depth) + keep;
    return recurse(depth - 1) + keep;
}

int main(int argc, char **argv)
{
    return recurse(argc > 1 ? atoi(argv[1]) : 1000) & 0x7f;
}
