"""Stacks of live processes and core files, without a debugger: the
command line's front end, as gdb/ and lldb/ are the debuggers'.

- ``ptrace``: attaching to threads (PTRACE_SEIZE/INTERRUPT), their
  register sets, and process_vm_readv, through ctypes on libc;
- ``memory``: paged memory with per-thread stack snapshots (a snapshot
  answers every read of its span from its copy);
- ``mappings``: /proc/PID/smaps and a core's NT_FILE as modules, the vDSO;
- ``images``: which file holds each mapped image (the mapped one, not a
  file that replaced it), and reads of a process's pages from it;
- ``process``, ``corefile``: a snapshot of each thread (registers, stack)
  from a process (``SeizedProcess``: its threads seized for a recording)
  or a core file (``core_notes``: the core's note layouts, which the
  crash handler's reader shares; ``linkmap``: a core's libraries from the
  dynamic linker's link map);
- ``session``: the debugger-free Session over those snapshots;
- ``symbols``: names and lines of the walked frames;
- ``stack``: `sfbt stack`, sframe-bt of each thread (or cbf-save);
- ``samples``: what every stack source of `sfbt record` shares: a sample
  walked and written into the archive;
- ``record``: `sfbt record --idle`, sampling stacks with ptrace;
- ``perf_events``, ``perf_source``: `sfbt record` on the kernel's perf
  events (its default);
- ``commands``: `sfbt stack`, `record` and `flame` on the command line
  (the formats `flame` writes: sfbt.outputs).
"""
