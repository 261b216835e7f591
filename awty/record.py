"""Read-only records that are cheap to import and cheap to build.

Frozen dataclasses cost twice, and both costs land on hot paths: at import, ``dataclasses``
(with ``inspect`` and ``ast``) loads and compiles every class's methods with ``exec`` on each
process start (~25 ms of `awty add` before this module); per instance, each field is set
through ``object.__setattr__`` (5.7 µs for a ``Job``, built once per claimed row). A
``Record`` writes its own ``__new__``, compiled into the module's ``.pyc`` like any code: it
fills an instance of the class's mutable twin (same slots, plain ``__setattr__``), then turns
that instance into the record's class, whose ``__setattr__`` refuses: 0.6 µs for a ``Job``,
and as read-only as before.

A subclass lists its fields in ``__slots__`` in the order of its ``__new__`` parameters, and
ends ``__new__`` with ``return _seal(s, cls)`` on ``s = _draft(cls)``. Equality, hash, repr,
pickling and ``replace`` follow the fields.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing costs `awty add` ~3 ms; mypy reads this name as True
if TYPE_CHECKING:
    from typing import Any, Self, TypeVar

    R = TypeVar("R", bound="Record")


class ReadOnlyError(AttributeError):
    """Assigning to a record's field (``dataclasses.FrozenInstanceError`` is an AttributeError
    too)."""


class Record:
    __slots__ = ()
    _fields: tuple[str, ...] = ()
    _draft: type

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("_is_draft"):
            return
        cls._fields = tuple(cls.__dict__.get("__slots__", ()))
        # Both, or neither: they share one type slot, and a Python __delattr__ left on the twin
        # would route every assignment through Python (1.0 instead of 0.2 µs for 8 fields).
        cls._draft = type(f"_{cls.__name__}Draft", (cls,),
                          {"__slots__": (), "_is_draft": True, "__module__": cls.__module__,
                           "__setattr__": object.__setattr__,
                           "__delattr__": object.__delattr__})

    def __setattr__(self, name: str, value: Any) -> None:
        raise ReadOnlyError(f"cannot assign to field {name!r}: {type(self).__name__} is "
                            "read-only (frozen); use .replace()")

    def __delattr__(self, name: str) -> None:
        raise ReadOnlyError(f"cannot delete field {name!r}: {type(self).__name__} is "
                            "read-only (frozen)")

    def _values(self) -> tuple[Any, ...]:
        return tuple([getattr(self, n) for n in self._fields])

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._values() == other._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        inner = ", ".join(f"{n}={getattr(self, n)!r}" for n in self._fields)
        return f"{type(self).__qualname__}({inner})"

    def __reduce__(self) -> tuple[Any, ...]:
        return self.__class__, self._values()

    def __copy__(self) -> Self:
        return self  # read-only: a copy would be the same in every way

    def __deepcopy__(self, memo: dict[int, Any]) -> Self:
        from copy import deepcopy

        return self.__class__(*[deepcopy(v, memo) for v in self._values()])

    def replace(self, **changes: Any) -> Self:
        """A copy with ``changes`` (``dataclasses.replace``): unknown names raise TypeError."""
        values = {n: getattr(self, n) for n in self._fields}
        values.update(changes)
        return self.__class__(**values)

    def as_dict(self) -> dict[str, Any]:
        return {n: getattr(self, n) for n in self._fields}


def _draft(cls: type[R]) -> Any:
    """A blank instance of ``cls``'s mutable twin, for ``__new__`` to fill."""
    return object.__new__(cls._draft)


def _seal(draft: Any, cls: type[R]) -> R:
    """The filled twin, now a ``cls``: read-only from here on."""
    draft.__class__ = cls
    return draft  # type: ignore[no-any-return]  # a cls now: its class was just set


def replace(record: R, /, **changes: Any) -> R:
    """``dataclasses.replace`` for records: ``record.replace(**changes)``."""
    return record.replace(**changes)
