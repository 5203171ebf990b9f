"""Pydantic models (or dataclasses) as Avro record schemas: the value schema
a Kafka source decodes (``format=avro`` or ``json``) into typed columns."""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import json
import typing
import uuid
from typing import Any, Dict, Union

from .errors import SchemaMappingError

__all__ = ["avro_schema", "avro_schema_json"]

_PRIMITIVES = {int: "long", float: "double", str: "string", bool: "boolean", bytes: "bytes"}


def _fields_of(model: Any) -> Dict[str, Any]:
    if dataclasses.is_dataclass(model):
        hints = typing.get_type_hints(model)
        return {f.name: hints[f.name] for f in dataclasses.fields(model)}
    mf = getattr(model, "model_fields", None)
    if mf is not None:  # pydantic v2
        return {name: f.annotation for name, f in mf.items()}
    raise SchemaMappingError(f"{model!r} is not a pydantic model or a dataclass", field="")


def _is_model(t: Any) -> bool:
    return isinstance(t, type) and (dataclasses.is_dataclass(t) or hasattr(t, "model_fields"))


def _type(t: Any, path: str, names: set) -> Any:
    origin = typing.get_origin(t)
    args = typing.get_args(t)
    if origin is Union or (origin is not None and getattr(origin, "__name__", "") == "UnionType") or type(t).__name__ == "UnionType":
        rest = [a for a in args if a is not type(None)]
        if len(rest) == 1 and len(rest) < len(args):
            return ["null", _type(rest[0], path, names)]
        raise SchemaMappingError(f"field {path}: {t} is a union Avro values here cannot hold (only Optional[X])", field=path)
    if origin in (list, typing.List, tuple) and args:
        return {"type": "array", "items": _type(args[0], path + "[]", names)}
    if origin in (dict, typing.Dict):
        raise SchemaMappingError(f"field {path}: {t}: maps are not supported by the Kafka decoder; use a nested model", field=path)
    if t in _PRIMITIVES:
        return _PRIMITIVES[t]
    if t is datetime.datetime:
        return {"type": "long", "logicalType": "timestamp-millis"}
    if t is datetime.date:
        return {"type": "int", "logicalType": "date"}
    if _is_model(t):
        return _record(t, path, names)
    kind = "Decimal" if t is decimal.Decimal else "UUID" if t is uuid.UUID else getattr(t, "__name__", repr(t))
    raise SchemaMappingError(f"field {path}: type {kind} has no Avro mapping here "
                             "(int, float, str, bool, bytes, datetime, date, Optional, list, nested models)", field=path)


def _record(model: Any, path: str, names: set) -> Dict[str, Any]:
    name = model.__name__
    if name in names:
        raise SchemaMappingError(f"field {path}: record {name} is recursive or named twice", field=path)
    names.add(name)
    fields = []
    for fname, t in _fields_of(model).items():
        p = f"{path}.{fname}" if path else fname
        ft = _type(t, p, names)
        f: Dict[str, Any] = {"name": fname, "type": ft}
        if isinstance(ft, list) and ft[0] == "null":
            f["default"] = None
        fields.append(f)
    return {"type": "record", "name": name, "fields": fields}


def avro_schema(model: Any) -> Dict[str, Any]:
    """The Avro record schema of a pydantic model (v2) or a dataclass.

    Raises:
        SchemaMappingError: a field whose type cannot be mapped; its
            ``field`` attribute is the dotted path.
    """
    return _record(model, "", set())


def avro_schema_json(model: Any) -> str:
    """:func:`avro_schema` as JSON text (an ``.avsc`` file's content)."""
    return json.dumps(avro_schema(model), indent=2)
