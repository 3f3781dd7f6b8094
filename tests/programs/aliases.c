/* Functions of several names at one address, as the C library has them
   (tests/test_gdb_names.py): each frame of the stack it waits in has a
   local name, global, weak or other local aliases, a name in the
   assembly that is not the one in the source (renamed_in_asm, and
   step_in_asm, inlined), or versioned names (lib_api in libaliases.so).
   Prints "ready" once it waits, in pause(). */
#include <stdio.h>
#include <unistd.h>

int lib_api(int (*next)(void));

/* a global alias, a weak one and a local one (wait_weak last by name) */
__attribute__((noinline, used)) static int wait_local(void)
{
    printf("ready\n");
    fflush(stdout);
    for (;;)
        pause();
    return 0;
}
int wait_global(void) __attribute__((alias("wait_local")));
int wait_weak(void) __attribute__((weak, alias("wait_local")));
static int wait_other(void) __attribute__((alias("wait_local"), used));

/* inlined into trio_c: GDB names its frame by its name in the assembly */
int step_in(int n) __asm__("step_in_asm");
__attribute__((always_inline)) inline int step_in(int n)
{
    return wait_weak() + n;
}

/* a global alias and two local ones, the last by name local */
__attribute__((noinline, used)) static int trio_c(void)
{
    int result = step_in(1);
    __asm__ volatile("" ::: "memory");
    return result + 1;
}
int trio_a(void) __attribute__((alias("trio_c")));
static int trio_b(void) __attribute__((alias("trio_c"), used));

/* a global alias just before the local name, the last by name */
__attribute__((noinline, used)) static int pair_zlocal(void)
{
    int result = trio_a();
    __asm__ volatile("" ::: "memory");
    return result + 1;
}
int pair_global(void) __attribute__((alias("pair_zlocal")));

int renamed(int n) __asm__("renamed_in_asm");
__attribute__((noinline)) int renamed(int n)
{
    int result = lib_api(pair_global);
    __asm__ volatile("" ::: "memory");
    return result + n;
}

int main(void)
{
    return renamed(1);
}
