/* Loaded and unloaded again and again by busy.c's loader thread: a few
 * frames of its own between the program's. */
__attribute__((noinline)) static void around(void (*back)(int), int depth)
{
    back(depth);
    __asm__ volatile("" ::: "memory");
}

void library_descend(void (*back)(int), int depth)
{
    around(back, depth);
    __asm__ volatile("" ::: "memory");
}
