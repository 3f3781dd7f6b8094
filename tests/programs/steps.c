/* Functions with prologues and epilogues and no library calls, for
   stepping instruction by instruction. */
__attribute__((noinline)) long leaf(long x) { return x * 7 + 3; }

__attribute__((noinline)) long middle(long x)
{
    long values[8];
    for (int i = 0; i < 8; i++)
        values[i] = leaf(x + i);
    return values[x & 7] + values[(x + 3) & 7];
}

__attribute__((noinline)) long outer(long x)
{
    return middle(x) + middle(x + 1);
}

int main(void)
{
    return (int)(outer(5) & 0x7f);
}
