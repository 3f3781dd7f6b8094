/* binutils 2.40 gives no SFrame entry to a function whose CFI uses
 * DW_CFA_GNU_args_size (tests/test_partly_sframe.py): caller() passes
 * arguments on the stack to a call that may throw.  many() waits in
 * pause() when not stopped at a breakpoint first. */
#include <stdexcept>
#include <unistd.h>
#define NOINLINE __attribute__((noinline))
NOINLINE int many(int a, int b, int c, int d, int e, int f, int g, int h, int i, int j)
{
    if (a < 0) throw std::runtime_error("negative");
    for (;;) pause();
    return a + b + c + d + e + f + g + h + i + j;
}
NOINLINE int caller(int x)
{
    try { return many(x, 1, 2, 3, 4, 5, 6, 7, 8, 9) + many(x, 9, 8, 7, 6, 5, 4, 3, 2, x); }
    catch (const std::exception &) { return -1; }
}
int main(int argc, char **) { int r = caller(argc); return r * 3 + 1; }
