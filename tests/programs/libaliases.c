/* lib_api, two versions of one function (ALIASES_1 and the default
   ALIASES_2, when built with -DVERSIONED and the version script
   libaliases.map) that is lib_impl and lib_impl_v1 inside the library:
   tests/test_gdb_names.py. */

__attribute__((noinline)) int lib_impl(int (*next)(void))
{
    int result = next();
    __asm__ volatile("" ::: "memory");
    return result + 1;
}
int lib_impl_v1(int (*next)(void)) __attribute__((alias("lib_impl")));
#ifdef VERSIONED
__asm__(".symver lib_impl, lib_api@@ALIASES_2");
__asm__(".symver lib_impl_v1, lib_api@ALIASES_1");
#endif
