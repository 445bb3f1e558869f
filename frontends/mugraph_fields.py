"""Typed reads of saved-muGraph JSON values for the importer: objects, lists, fields, bounded
ints, numbers and (x, y, z) triples, each raising `RuleError` (the broken rule and the
sub-location, e.g. a threadblock operator) that `import_mugraph` turns into a located
`MugraphImportError`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from mirage_xdsl.dialects import tiling
from mirage_xdsl.frontends.mugraph_schema import MAX_INT


class RuleError(Exception):
    """Internal: a rule violation at the current location (message without location);
    `sub` locates it inside the current operator (a threadblock operator)."""

    def __init__(self, message: str, sub: str | None = None):
        super().__init__(message)
        self.sub = sub


def fmt_dims(values: Sequence[int]) -> str:
    """`values` as `[a,b,...]` for a message."""
    return "[" + ",".join(str(v) for v in values) + "]"


def show_name(name: Any) -> str:
    """An operator type from the file, safe for a one-line message."""
    if isinstance(name, str) and name.isprintable() and len(name) <= 64:
        return name
    return json.dumps(name)[:64] if isinstance(name, str) else "?"


def json_kind(value: Any) -> str:
    """The JSON name of a parsed value's kind, for messages ("null", not "NoneType")."""
    kinds = ((bool, "a boolean"), (int, "an integer"), (float, "a number"), (str, "a string"),
             (list, "an array"), (dict, "an object"))
    if value is None:
        return "null"
    return next((name for typ, name in kinds if isinstance(value, typ)), type(value).__name__)


def is_json_int(value: Any) -> bool:
    """Whether `value` is a JSON integer (a Python int other than a bool)."""
    return isinstance(value, int) and not isinstance(value, bool)


def json_object(value: Any, what: str) -> dict[str, Any]:
    """`value` if it is a JSON object.

    Raises:
        RuleError: it is not (`what` names it).
    """
    if not isinstance(value, dict):
        raise RuleError(f"{what} must be a JSON object, got {json_kind(value)}")
    return value


def json_list(value: Any, what: str) -> list[Any]:
    """`value` if it is a JSON array.

    Raises:
        RuleError: it is not (`what` names it).
    """
    if not isinstance(value, list):
        raise RuleError(f"{what} must be a JSON array, got {json_kind(value)}")
    return value


def json_field(obj: dict[str, Any], key: str, what: str = "operator") -> Any:
    """Field `key` of `obj`.

    Raises:
        RuleError: `obj` has no such field (`what` names `obj`).
    """
    if key not in obj:
        raise RuleError(f"{what} has no field '{key}'")
    return obj[key]


def json_int(value: Any, what: str, lo: int = -MAX_INT, hi: int = MAX_INT) -> int:
    """`value` if it is an integer in [lo, hi] (default +-MAX_INT of the muGraph schema).

    Raises:
        RuleError: not an integer, or out of range.
    """
    if not is_json_int(value):
        raise RuleError(f"{what} must be an integer, got {json.dumps(value)[:40]}")
    if not lo <= value <= hi:
        raise RuleError(f"{what} = {value} is out of range [{lo}, {hi}]")
    return value


def json_number(value: Any, what: str) -> float:
    """`value` (a JSON integer or number) as a float.

    Raises:
        RuleError: not a number (booleans are refused), or an integer too large for a double.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise RuleError(f"{what} must be a number, got {json.dumps(value)[:40]}")
    try:
        return float(value)
    except OverflowError:
        raise RuleError(f"{what} = {value} does not fit a double") from None


def json_int3(obj: dict[str, Any], key: str, lo: int, hi: int = MAX_INT) -> tuple[int, int, int]:
    """An `{x, y, z}` object (a 3-element array is accepted too)."""
    value = json_field(obj, key)
    if isinstance(value, list):
        if len(value) != 3:
            raise RuleError(f"'{key}' must have 3 entries (x, y, z), got {len(value)}")
        return tuple(json_int(v, f"{key}[{i}]", lo, hi) for i, v in enumerate(value))  # type: ignore[return-value]
    value = json_object(value, f"'{key}'")
    return tuple(json_int(json_field(value, a, f"'{key}'"), f"{key}.{a}", lo, hi) for a in tiling.GRID_AXES)  # type: ignore[return-value]
