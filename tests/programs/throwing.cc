/* Exception unwinding (tests/test_exceptions.py): thrower throws through
 * middle (whose destructor-holding frame the personality routine visits)
 * to catcher's handler; libstdc++ and libgcc_s have no .sframe, so the
 * frames of __cxa_throw, _Unwind_RaiseException and the personality
 * routine come from their CFI. */
#include <cstdio>
#include <stdexcept>

#define NOINLINE __attribute__((noinline))
volatile int sink;

struct Guard {
    ~Guard() { sink = sink + 1; }
};

NOINLINE void thrower(int x)
{
    if (x > 0)
        throw std::runtime_error("thrown");
    sink = x;
}

NOINLINE int middle(int x)
{
    Guard guard;
    thrower(x);
    return sink + x;
}

NOINLINE int catcher(int x)
{
    try {
        return middle(x);
    } catch (const std::exception &) {
        return -1;
    }
}

int main(int argc, char **)
{
    std::printf("%d\n", catcher(argc));
    return 0;
}
