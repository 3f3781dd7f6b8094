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

try:
    import elftools  # noqa: F401
except ImportError:
    # LLDB's embedded Python takes its prefix from the first python3 on PATH
    # (a pyenv or virtualenv one, say) and then misses the system packages
    # that ./install.sh installed for it with apt.
    _SYSTEM_PACKAGES = "/usr/lib/python3/dist-packages"
    if os.path.isdir(_SYSTEM_PACKAGES) and _SYSTEM_PACKAGES not in sys.path:
        sys.path.append(_SYSTEM_PACKAGES)

try:
    import elftools  # noqa: F401,F811
except ImportError:
    sfbt_lldb_commands = None
else:
    import sfbt_lldb_commands

    # LLDB finds command and provider classes by name in the imported module.
    globals().update(sfbt_lldb_commands.classes())


def __lldb_init_module(debugger, internal_dict):
    if sfbt_lldb_commands is None:
        print(f"sfbt: not loaded: this LLDB's Python ({sys.prefix}) cannot import "
              "pyelftools; install it there (pip install pyelftools)", file=sys.stderr)
        return
    sfbt_lldb_commands.register(debugger, __name__)
