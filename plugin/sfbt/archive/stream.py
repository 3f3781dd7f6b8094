"""An archive written while it grows (`sfbt record`): its new records are
appended to an open file a batch at a time, so that what was sampled is on
disk before the recording ends.

A write that fails (a full disk, a quota, a file size limit) is cut back
to the end of the last whole record, and no more is written: the file
then holds every record before it, a complete archive that ends early."""

import os

from .store import KIND_EVENT, MAGIC


class ArchiveStream:
    """Appends ``archive``'s pending records to the file open on
    ``descriptor`` (empty, at offset 0).  ``failure`` is the OSError that
    ended the writing, or None; ``events`` counts the events on disk."""

    def __init__(self, archive, descriptor):
        self.archive = archive
        self.descriptor = descriptor
        self.size = 0
        self.events = 0
        self.failure = None
        self._write([(None, MAGIC)])
        if self.failure is not None:  # not even the magic fits: no archive
            raise self.failure

    def flush(self):
        """Write the records added since the last flush; False once a
        write failed."""
        if self.failure is None:
            self._write(self.archive.pending_records())
            self.archive.mark_written()
        return self.failure is None

    def _write(self, records):
        """Write [(kind, bytes)]; on a failure keep the whole ones written."""
        data = memoryview(b"".join(record for _, record in records))
        written = 0
        try:
            while written < len(data):
                written += os.write(self.descriptor, data[written:])
        except OSError as error:
            self.failure = error
        whole = 0
        for kind, record in records:
            if whole + len(record) > written:
                break
            whole += len(record)
            self.events += kind == KIND_EVENT
        if whole < written or self.failure is not None:
            os.ftruncate(self.descriptor, self.size + whole)
            os.lseek(self.descriptor, self.size + whole, os.SEEK_SET)
        self.size += whole
