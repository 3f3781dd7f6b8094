/* The shared library of the dynamically linked test programs.  */
__attribute__((noinline)) static int twice(int (*callback)(int), int value)
{
    return callback(value) + callback(value + 1);
}

int lib_apply(int (*callback)(int), int value)
{
    return twice(callback, value) * 2;
}
