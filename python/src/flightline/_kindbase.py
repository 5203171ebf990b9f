"""The base of the generated kind classes (flightline.kinds) and EnvRef."""

from __future__ import annotations

import datetime
import re
from typing import Any, ClassVar, Dict, Optional, Tuple

from .errors import ConfigError, PlaintextSecretError

__all__ = ["EnvRef", "Kind"]

_VAR = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_REF = re.compile(r"^\$\{[A-Za-z_][A-Za-z0-9_]*\}$")


class EnvRef:
    """A value read from the environment where the pipeline runs:
    written ``${NAME}`` in flightline.yml. Secrets take only this.

    Args:
        name: the environment variable's name.
    """

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        if not _VAR.match(name):
            raise ValueError(f"EnvRef({name!r}): want a variable name (letters, digits, _)")
        self.name = name

    def __str__(self) -> str:
        return "${" + self.name + "}"

    def __repr__(self) -> str:
        return f"EnvRef({self.name!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, EnvRef) and other.name == self.name

    def __hash__(self) -> int:
        return hash(("EnvRef", self.name))


def _duration(td: datetime.timedelta) -> str:
    ms = round(td.total_seconds() * 1000)
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"


def _value(where: str, typ: str, secret: bool, enum: Tuple[str, ...], v: Any) -> Any:
    """v as the JSON value config apply takes for a key of type typ."""
    if isinstance(v, EnvRef):
        return str(v)
    if secret:
        if isinstance(v, str) and _REF.match(v):
            return v
        raise PlaintextSecretError(f"{where} is a secret: write it as EnvRef(\"VAR\") (the value is not shown)")
    if typ == "list":
        if isinstance(v, str):
            return v
        items = [str(x) for x in v]
        for it in items:
            if "," in it:
                raise ConfigError(f"{where}: {it!r}: a list item cannot hold a comma")
        return items
    if typ == "bool":
        if not isinstance(v, bool):
            raise ConfigError(f"{where}: want True or False, not {v!r}")
        return v
    if typ == "integer":
        if isinstance(v, bool) or not isinstance(v, int):
            raise ConfigError(f"{where}: want an int, not {v!r}")
        return v
    if typ == "duration" and isinstance(v, datetime.timedelta):
        return _duration(v)
    if typ == "size" and isinstance(v, int) and not isinstance(v, bool):
        return v
    if typ == "enum":
        if str(v).lower() not in enum:
            raise ConfigError(f"{where}: {v!r}: want one of {', '.join(enum)}")
        return str(v).lower()
    if not isinstance(v, str):
        raise ConfigError(f"{where}: want a str, not {type(v).__name__}")
    return v


class Kind:
    """An entry of flightline.yml: one kind and its keys.

    The classes of :mod:`flightline.kinds` are generated from the binary's
    declarations (``flightline config schema --json``); each checks its
    values as it is built (a secret must be an :class:`EnvRef`), and the
    binary's loader checks them again when the config is saved.
    """

    section: ClassVar[str]
    kind: ClassVar[str]
    # key -> (type, secret, enum values)
    _keys: ClassVar[Dict[str, Tuple[str, bool, Tuple[str, ...]]]]
    # Python argument name -> key, where they differ
    _names: ClassVar[Dict[str, str]] = {}

    def _init(self, args: Dict[str, Any]) -> None:
        fields: Dict[str, Any] = {}
        for name, v in args.items():
            if name == "self" or name.startswith("__") or v is None:
                continue
            key = self._names.get(name, name)
            typ, secret, enum = self._keys[key]
            fields[key] = _value(f"{self.kind}.{key}", typ, secret, enum, v)
        self._fields = fields

    @property
    def fields(self) -> Dict[str, Any]:
        """The keys given, as flightline.yml holds them."""
        return dict(self._fields)

    def __repr__(self) -> str:
        shown = {k: ("${…}" if self._keys[k][1] else v) for k, v in self._fields.items()}
        return f"{type(self).__name__}({shown})"

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other._fields == self._fields  # type: ignore[attr-defined]

    __hash__ = None  # type: ignore[assignment]

    def get(self, key: str) -> Optional[Any]:
        """The value of key, or None."""
        return self._fields.get(key)
