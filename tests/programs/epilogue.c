/* A function that spins in its epilogue after popping its caller's frame
 * pointer, where the CFI still says rbp is saved at CFA-16: below the
 * stack pointer by then (GCC's epilogues write no .cfi_restore, glibc's
 * _IO_default_xsputn is one).  Its caller keeps its frame on rbp (a
 * variable alloca).  For `sfbt record` on perf events, whose stack copy
 * starts at the stack pointer.  x86-64.  Prints "ready" once running. */
#include <alloca.h>
#include <stdio.h>

void popped(long rounds);

__asm__(".text\n"
        ".globl popped\n"
        ".type popped, @function\n"
        "popped:\n"
        ".cfi_startproc\n"
        "    pushq %rbp\n"
        ".cfi_def_cfa_offset 16\n"
        ".cfi_offset %rbp, -16\n"
        "    xorl %ebp, %ebp\n" /* the function's own use of rbp */
        "    popq %rbp\n"
        ".cfi_def_cfa_offset 8\n" /* rbp's rule kept, as GCC keeps it */
        "1:  decq %rdi\n"
        "    jnz 1b\n"
        "    ret\n"
        ".cfi_endproc\n"
        ".size popped, .-popped\n");

__attribute__((noinline)) void framed(long rounds)
{
    volatile char *buffer = alloca(16 + (rounds & 64)); /* a size not known: rbp keeps the frame */
    buffer[0] = 1;
    popped(rounds);
    buffer[1] = 2;
}

int main(void)
{
    volatile long rounds = 1000000;
    printf("ready\n");
    fflush(stdout);
    for (;;)
        framed(rounds);
}
