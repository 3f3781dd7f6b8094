"""/proc/kallsyms read as perf reads it: of several names of one address,
the one perf prints (the last listed), on a synthetic kallsyms text
(test_perf_data compares the kernel frames of a perf.data with perf
script's, names as they are)."""

from sfbt.symbols.kallsyms import parse_kallsyms

#: a kallsyms text: aliases of one function (a local one, two global
#: ones), a weak one listed after a global one, a global one after a
#: local one, a bss symbol after a function, an ARM mapping symbol, a
#: module's functions and a symbol of no text
KALLSYMS = b"""\
ffffffff81000000 T _text
ffffffff81000000 T _stext
ffffffff81001000 t __do_sys_getppid
ffffffff81001000 T __ia32_sys_getppid
ffffffff81001000 T __x64_sys_getppid
ffffffff81002000 T strong_first
ffffffff81002000 W weak_after
ffffffff81003000 T global_first
ffffffff81003000 t local_after
ffffffff81004000 t local_first
ffffffff81004000 T global_after
ffffffff81005000 T _sinittext
ffffffff81005000 B __init_begin
ffffffff81006000 T mapped
ffffffff81006000 t $x
ffffffff81007000 d data_only
ffffffffc0001000 t module_alias_a\t[mod]
ffffffffc0001000 t module_alias_bb\t[mod]
0000000000000000 T hidden
"""


def test_of_the_names_of_an_address_the_last_listed_as_perf_names_it():
    kernel = parse_kallsyms(KALLSYMS, "ab" * 20)
    assert kernel.base_address == 0xffffffff81000000 and kernel.build_id == "ab" * 20
    named = {address: kernel.function(address + 0x10) for address in
             range(0xffffffff81000000, 0xffffffff81007000, 0x1000)}
    assert named == {
        0xffffffff81000000: "_stext",
        0xffffffff81001000: "__x64_sys_getppid",  # (the old choice: __ia32_sys_getppid)
        0xffffffff81002000: "weak_after",
        0xffffffff81003000: "local_after",
        0xffffffff81004000: "global_after",
        0xffffffff81005000: "__init_begin",  # a text address perf names by a bss symbol
        0xffffffff81006000: "mapped",  # ($x: a mapping symbol perf leaves out)
    }
    # a data symbol names no address of its own (sfbt names text only):
    # the function before it holds it
    assert kernel.function(0xffffffff81007000) == "mapped"
    assert kernel.function(0xffffffffc0001004) == "module_alias_bb"
    assert kernel.function(0xffffffff80fff000) is None


def test_a_hidden_kallsyms_is_no_kernel():
    assert parse_kallsyms(b"0000000000000000 T _stext\n0000000000000000 t f\n") is None
    assert parse_kallsyms(b"") is None
