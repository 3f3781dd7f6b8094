/* sfbt's demo program: a short call chain with recursion, built with
   SFrame data (gcc -Wa,--gsframe).  It stops itself with SIGTRAP at the
   deepest frame so that a debugger has a backtrace to show. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) static int leaf(int depth)
{
    volatile int here = depth;
    raise(SIGTRAP);
    return here;
}

__attribute__((noinline)) static int recurse(int depth)
{
    if (depth == 0)
        return leaf(depth);
    return recurse(depth - 1) + 1;
}

__attribute__((noinline)) static int parse(const char *arg)
{
    return recurse(arg ? atoi(arg) : 3);
}

int main(int argc, char **argv)
{
    signal(SIGTRAP, SIG_IGN);
    printf("%d\n", parse(argc > 1 ? argv[1] : NULL));
    return 0;
}
