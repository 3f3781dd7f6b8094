"""Stacks of live processes and core files, without a debugger.

- ``ptrace``: attaching to threads (PTRACE_SEIZE/INTERRUPT), their
  register sets, and process_vm_readv, through ctypes on libc;
- ``memory``: paged memory with per-thread stack snapshots (a snapshot
  answers every read of its span from its copy);
- ``mappings``: /proc/PID/smaps and a core's NT_FILE as modules, the vDSO;
- ``images``: which file holds each mapped image (the mapped one, not a
  file that replaced it), and reads of a process's pages from it;
- ``process``, ``core``: a snapshot of each thread (registers, stack) and
  a Target for the unwinder, from a process or a core file;
- ``stack``: the walk, symbolization and output of `sfbt stack`;
- ``record``: `sfbt record`, sampling stacks into an archive;
- ``flame``: flame graphs (SVG) and speedscope's JSON.
"""
