/* crasher's library: calls back from a few frames deep, then crashes
   itself when the callback returns. */
static volatile int lib_sink;

__attribute__((noinline)) void crasher_lib_apply(void (*fn)(int), int depth)
{
    if (depth > 0) {
        crasher_lib_apply(fn, depth - 1);
        lib_sink++;
        return;
    }
    *(volatile int *)(long)lib_sink = 0;
    fn(0);
}
