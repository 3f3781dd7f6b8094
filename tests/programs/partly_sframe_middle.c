/* Assembled without --gsframe (see partly_sframe.c): a frame without a
 * frame pointer at -O2, found only through its .eh_frame CFI. */
#define NOINLINE __attribute__((noinline))

int innermost(int depth);

NOINLINE int middle(int depth)
{
    volatile int scratch[16];
    for (int i = 0; i < 16; i++)
        scratch[i] = depth + i;
    return innermost(depth + scratch[3]) + scratch[5];
}
