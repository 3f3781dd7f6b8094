/* The call chain the qemu tests stop in: main -> chain -> recurse x N ->
   large_frame (a 70 KB frame) -> with_vla (a variable-length array) ->
   stop_here.  Compiled once per variant with -DSUFFIX=_NAME, so that one
   executable holds every variant under its own names (chain_O0,
   chain_O2, ...).  No library calls: single-stepping stays in code with
   SFrame data.  With -DVIA_LIBRARY the deepest recursion level calls
   large_frame back through lib_apply() in a shared library.  */

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define F(name) CAT(name, SUFFIX)
#define NOINLINE __attribute__((noinline, noclone))

#ifdef VIA_LIBRARY
int lib_apply(int (*callback)(int), int value);
#endif

NOINLINE void F(stop_here)(void) { __asm__ volatile("" ::: "memory"); }

NOINLINE int F(with_vla)(int n)
{
    char buffer[n];  /* variable-length array */
    volatile char *fill = buffer;
    for (int i = 0; i < n; i++)
        fill[i] = (char)(n + i);
    F(stop_here)();
    return fill[n / 2];
}

NOINLINE int F(large_frame)(int n)
{
    volatile char big[70000];  /* a frame larger than any immediate offset */
    big[n] = (char)n;
    big[69999] = 1;
    int r = F(with_vla)(n * 3 + 1);
    return r + big[n] + big[69999];
}

NOINLINE int F(recurse)(int depth)
{
    volatile int keep = depth;  /* read after the call: no loop, no tail call */
    if (depth == 0) {
#ifdef VIA_LIBRARY
        return lib_apply(F(large_frame), keep + 5) + keep;
#else
        return F(large_frame)(keep + 5) + keep;
#endif
    }
    return F(recurse)(depth - 1) + keep;
}

int F(chain)(int depth)
{
    return F(recurse)(depth) + 1;
}
