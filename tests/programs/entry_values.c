/* Stops where GDB's DWARF unwinder knows more than SFrame rows say: a
   tail call (mid jumps to leaf at -O2: GDB shows mid as a tail-call
   frame), arguments kept in callee-saved registers (keeper's base@entry
   and n@entry), and a call through the PLT (puts). */
#include <stdio.h>

volatile int sink;

__attribute__((noinline)) void stop_here(int value)
{
    sink = value;
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) int leaf(int x)
{
    stop_here(x);
    return x * 3;
}

__attribute__((noinline)) int mid(int x)
{
    return leaf(x + 1);
}

__attribute__((noinline)) long keeper(long base, long n)
{
    long total = 0;
    for (long i = 0; i < n; i++)
        total += mid((int)(base + i));
    puts("keeper");
    return total + base + n;
}

int main(void)
{
    return (int)(keeper(42, 5) & 0x7f);
}
