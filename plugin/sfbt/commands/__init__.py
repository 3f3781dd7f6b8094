"""The debugger commands, each written once against the Session interface
(session.py); gdb/ and lldb/ implement Session and register the commands.

- ``backtrace``: sframe-bt;
- ``save``: cbf-save;
- ``load``: cbf-load;
- ``info``: info sframe / sframe-info;
- ``settings``: the settings both debuggers show.
"""

from ..errors import CommandError
from .session import Session, Thread
from .settings import SETTINGS, Settings

__all__ = ["CommandError", "SETTINGS", "Session", "Settings", "Thread"]
