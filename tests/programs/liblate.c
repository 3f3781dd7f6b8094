/* Loaded by late_library.c once it is traced: a leaf that spins for good
 * (no frame of its own: the word at SP is its return address). */
static volatile unsigned long sink;

void library_spin(void)
{
    for (;;)
        sink++;
}
