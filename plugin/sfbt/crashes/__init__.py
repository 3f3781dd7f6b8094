"""A machine's crashes kept as backtraces: sfbt as the kernel's core
handler (docs/crashes.md)."""
