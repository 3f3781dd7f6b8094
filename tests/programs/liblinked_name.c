/* A library whose frames have no line (it is stripped) and, in spin_here,
   no name (a static function, without its symbol once stripped). */
static volatile unsigned long turns;

static __attribute__((noinline)) void spin_here(void)
{
    for (;;)
        if (++turns == 0)
            break;
}

void linked_spin(void)
{
    spin_here();
    turns += 2;
}
