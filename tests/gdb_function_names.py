"""Loaded into gdb (``gdb -nx``) by tests/test_gdb_names.py:
`test-function-names FILE` prints, for each address in FILE (one in hex
a line), the name GDB gives the function of a frame there: of its DWARF
function (the outermost function block around it: inlined calls left
out), else of its minimal symbol (`info symbol`), as
``FUNCTION-NAME 0x... NAME``, ``??`` where it has none."""

import gdb


def _function_name(pc):
    try:
        block = gdb.block_for_pc(pc)
    except RuntimeError:
        block = None
    function = None
    while block is not None and not block.is_static and not block.is_global:
        function = block.function or function
        block = block.superblock
    if function is not None:
        return function.name
    said = gdb.execute(f"info symbol {pc:#x}", to_string=True)
    if " in section " not in said:
        return "??"
    return said.split(" in section ")[0].rsplit(" + ", 1)[0]


class FunctionNames(gdb.Command):
    def __init__(self):
        super().__init__("test-function-names", gdb.COMMAND_USER)

    def invoke(self, argument, from_tty):
        with open(argument) as stream:
            for pc in (int(word, 16) for word in stream.read().split()):
                gdb.write(f"FUNCTION-NAME {pc:#x} {_function_name(pc)}\n")


FunctionNames()
