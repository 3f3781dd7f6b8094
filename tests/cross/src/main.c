/* main VARIANT [DEPTH]: run chain_VARIANT (see chain.c) DEPTH levels deep.
   Built with -DVARIANTS='X(O0) X(O2) ...', the variants linked in.  */

#define X(name) int chain_##name(int);
VARIANTS
#undef X

static int same(const char *a, const char *b)
{
    while (*a && *a == *b)
        a++, b++;
    return *a == *b;
}

static int number(const char *text)
{
    int value = 0;
    while (*text >= '0' && *text <= '9')
        value = value * 10 + (*text++ - '0');
    return value;
}

int main(int argc, char **argv)
{
    const char *variant = argc > 1 ? argv[1] : "";
    int depth = argc > 2 ? number(argv[2]) : 3;
#define X(name) if (same(variant, #name)) return chain_##name(depth) & 0x7f;
    VARIANTS
#undef X
    return 127;
}
