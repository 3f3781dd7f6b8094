"""GDB entry file: `source /path/to/sfbt/gdb/sfbt_gdb.py` (./install.sh adds
that line to ~/.gdbinit).  Registers sframe-bt, cbf-save, cbf-load,
info sframe, the `set/show sframe` settings and the SFrame frame unwinder
(sfbt_gdb_commands.py)."""

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
for _path in (os.path.join(os.path.dirname(_HERE), "plugin"), _HERE):
    if _path not in sys.path:
        sys.path.insert(0, _path)

import sfbt_gdb_commands  # noqa: E402  (needs the sys.path set above)

sfbt_gdb_commands.register()
