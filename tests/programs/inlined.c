/* Small functions inlined into their callers at -O2, interleaved with the
   callers' prologues and epilogues: frame #0 is often an inline frame whose
   PC starts a row (the instruction before it pushed or popped).  SIGUSR1
   (sent by the debugger) runs on_signal. */
#include <signal.h>

struct lexer { const char *text; int at; long depth; long sum; };

__attribute__((noinline)) long stop_here(long value)
{
    __asm__ volatile("" ::: "memory");
    return value + 1;
}

static inline int peek(struct lexer *lx) { return lx->text[lx->at]; }

static inline int advance(struct lexer *lx)
{
    int c = peek(lx);
    if (c)
        lx->at++;
    return c;
}

static inline long number(struct lexer *lx)
{
    long value = 0;
    while (peek(lx) >= '0' && peek(lx) <= '9')
        value = value * 10 + (advance(lx) - '0');
    return stop_here(value);
}

static long expression(struct lexer *lx);

static inline long primary(struct lexer *lx)
{
    if (peek(lx) == '(') {
        advance(lx);
        lx->depth++;
        long value = expression(lx);
        lx->depth--;
        advance(lx);
        return value;
    }
    return number(lx);
}

static inline long term(struct lexer *lx)
{
    long value = primary(lx);
    while (peek(lx) == '*') {
        advance(lx);
        value *= primary(lx);
    }
    return value;
}

__attribute__((noinline)) static long expression(struct lexer *lx)
{
    long value = term(lx);
    while (peek(lx) == '+' || peek(lx) == '-') {
        int op = advance(lx);
        long right = term(lx);
        value = op == '+' ? value + right : value - right;
        lx->sum += stop_here(value ^ right);
    }
    return value;
}

__attribute__((noinline)) static void on_signal(int signo)
{
    stop_here(signo);
}

int main(int argc, char **argv)
{
    signal(SIGUSR1, on_signal);
    const char *text = argc > 1 ? argv[1] : "1+2*(3+4*(5-6))-7*8+(9)";
    struct lexer lx = { text, 0, 0, 0 };
    long value = expression(&lx);
    return (int)((value + lx.sum) & 0x7f);
}
