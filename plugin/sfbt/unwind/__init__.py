"""Walking a stack with SFrame data, debugger-free.

- ``target``: the interface a debugger (or a process or core reader)
  implements: memory, the innermost registers, the loaded modules;
- ``modules``: which module covers an address, and its SFrame data;
- ``walk``: one frame to its caller, to the end of the stack.
"""
