"""``replace`` for the ledger's frozen value objects, as ``dataclasses.replace`` does it, at
half the cost: ``dataclasses.replace`` walks the class's fields and their kinds on every
call. (The copies every decision makes, of a key's state and of its receipt, have their
own written-out methods, ``KeyState.changed`` and ``Receipt.with_origin``, which the
compiled core runs as native code; this generated function stays interpreted.)

Here each class gets, once, a compiled function that passes every field to the
constructor: the changed ones from ``changes``, the others from the object. A name that is
not a field raises TypeError, as ``dataclasses.replace`` does; classes with fields outside
``__init__`` are not supported, nor are InitVar pseudo-fields (a change to one raises
TypeError here; none in the domain).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def replace(obj: T, /, **changes: Any) -> T:
    """A copy of the dataclass instance ``obj`` with ``changes`` applied."""
    cls: Any = type(obj)
    rebuilt: T = _replacer(cls)(obj, changes)
    return rebuilt


@functools.cache
def _replacer(cls: type) -> Callable[[Any, dict[str, Any]], Any]:
    fields = dataclasses.fields(cls)
    if any(not f.init for f in fields):
        raise TypeError(f"{cls.__name__} has fields outside __init__: use dataclasses.replace")
    names = frozenset(f.name for f in fields)
    arguments = ", ".join(f"{f.name}=c[{f.name!r}] if {f.name!r} in c else o.{f.name}"
                          for f in fields)
    source = (
        "def replace(o, c):\n"
        "    if not c.keys() <= names:\n"
        "        raise TypeError(f'{cls.__name__} has no field '\n"
        "                        f'{\", \".join(sorted(c.keys() - names))}')\n"
        f"    return cls({arguments})\n"
    )
    scope: dict[str, Any] = {"cls": cls, "names": names}
    exec(compile(source, f"<ledger_stream.domain.values replace {cls.__name__}>", "exec"),
         scope)
    compiled: Callable[[Any, dict[str, Any]], Any] = scope["replace"]
    return compiled
