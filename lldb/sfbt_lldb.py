"""LLDB entry file: `command script import /path/to/sfbt/lldb/sfbt_lldb.py`
(./install.sh adds that line to ~/.lldbinit).  Registers sframe-bt,
cbf-save, cbf-load, sframe-info, sframe-settings and sframe-provider
(sfbt_lldb_commands.py)."""

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
for _path in (os.path.join(os.path.dirname(_HERE), "plugin"), _HERE):
    if _path not in sys.path:
        sys.path.insert(0, _path)

import sfbt_lldb_commands  # noqa: E402  (needs the sys.path set above)

# LLDB finds command and provider classes by name in the imported module.
globals().update(sfbt_lldb_commands.classes())


def __lldb_init_module(debugger, internal_dict):
    sfbt_lldb_commands.register(debugger, __name__)
