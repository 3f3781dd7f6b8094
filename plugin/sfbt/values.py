"""Value classes without ``dataclasses`` or ``typing``, whose imports
(with ``inspect``, ``ast`` and ``dis``) would cost every `sfbt stack`
several milliseconds.

- ``Value``: a subclass lists its fields and writes its own ``__init__``
  (with ``__slots__``); it gets what a dataclass would: equality (between
  instances of the same class) and a hash over the fields compared, a
  repr of the fields shown, and ``replace``.
- ``NamedTuple``: typing.NamedTuple's class syntax (fields annotated,
  defaults, methods) over collections.namedtuple.  A module takes
  typing's for mypy and this one when it runs::

      TYPE_CHECKING = False
      if TYPE_CHECKING:
          from typing import NamedTuple
      else:
          from ..values import NamedTuple
"""

from collections import namedtuple
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


class _NamedTupleMeta(type):
    """Makes ``class C(NamedTuple)`` the namedtuple of C's annotated
    fields (their values the defaults), with the rest of C's body (its
    docstring, methods, properties) set on it, as typing's does.  The
    class made is a plain one: its subclasses are made as any class is."""

    def __new__(cls, name, bases, namespace):
        fields = tuple(namespace.get("__annotations__", ()))
        made = namedtuple(name, fields, module=namespace["__module__"],
                          defaults=[namespace[f] for f in fields if f in namespace])
        for key, value in namespace.items():
            if key not in fields:
                setattr(made, key, value)
        return made


NamedTuple = type.__new__(_NamedTupleMeta, "NamedTuple", (), {})
