"""Value classes without ``dataclasses``, whose import (with ``inspect``,
``ast`` and ``dis``) would cost every `sfbt stack` several milliseconds.

A subclass lists its fields and writes its own ``__init__`` (with
``__slots__``); ``Value`` gives it what a dataclass would: equality (between
instances of the same class) and a hash over the fields compared, a repr
of the fields shown, and ``replace``.
"""

from operator import attrgetter


class Value:
    """Base of a value class.  Subclasses set ``_fields`` (every field, in
    ``__init__``'s order: at least two), and may set ``_uncompared`` (left
    out of equality and hash) and ``_unshown`` (left out of the repr).  A
    class whose instances change sets ``__hash__ = None``."""

    __slots__ = ()
    _fields: tuple = ()
    _uncompared: tuple = ()
    _unshown: tuple = ()

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls._compared = attrgetter(*(f for f in cls._fields if f not in cls._uncompared))
        cls._shown = tuple(f for f in cls._fields if f not in cls._unshown)

    def __eq__(self, other):
        if other.__class__ is self.__class__:
            return self._compared(self) == other._compared(other)
        return NotImplemented

    def __hash__(self):
        return hash(self._compared(self))

    def __repr__(self):
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._shown)
        return f"{self.__class__.__qualname__}({shown})"

    def replace(self, **changes):
        """A copy with the fields ``changes`` names changed
        (dataclasses.replace)."""
        values = {name: getattr(self, name) for name in self._fields}
        values.update(changes)
        return self.__class__(**values)
