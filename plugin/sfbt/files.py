"""Writing files so that readers never see half of one."""

import os
import tempfile


def write_atomically(path, data):
    """Write a whole file through a temporary file in the same directory
    and a rename: readers see the old file or the new one."""
    directory = os.path.dirname(os.path.abspath(path))
    handle, temporary = tempfile.mkstemp(prefix=".sfbt-", dir=directory)
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise
