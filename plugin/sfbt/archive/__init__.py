"""Backtraces kept outside the debugger.

- ``cbf``: the Compact Backtrace Format (one backtrace);
- ``imagemap``: Swift's Compact Image Map Format (the images it ran in);
- ``lws``: libwebsockets' ``~m#`` compressed backtraces;
- ``store``: sfbt's archive file, many backtraces each stored once;
- ``saved``: reading every form cbf-save writes;
- ``symbolize``: the ELF file of each archived image, symbolized by sfbt.symbols;
- ``report``: printing backtraces, and folded stacks.
- ``layout``: a frame's lines as each debugger's bt prints them.
"""
