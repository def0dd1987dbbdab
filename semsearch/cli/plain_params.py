"""Plain options converted as typer converts them, without importing pydantic for it.

Why: typer 0.29 converts every parameter of the command it runs through a pydantic
`TypeAdapter` built on first use; importing pydantic and building the adapters of `semsearch
query`'s 24 options is 0.14 s of a 0.75 s cold query. Every option semsearch declares is a
plain str, int, float, bool, Path or list of str with none of typer's constraints, and a
value typed on a command line becomes one of those through Python's own constructors. A
value this module is not sure of (a number written loosely, a path typer would refuse,
anything else) goes to typer's own conversion, so every value and every error message is
typer's (tests/cli/test_plain_params.py compares them); a parameter without typer's
`type_descriptor` is left to typer as it is.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

_TYPERS = object()  # "not sure: ask typer"
# Numbers as a person types them; pydantic reads each the same way (and more, loosely).
_INTEGER = re.compile(r"-?[0-9]{1,18}")
_DECIMAL = re.compile(r"-?[0-9]{1,15}(\.[0-9]{1,15})?")
# typer's defaults for the constraints of a parameter: a parameter that sets any other value
# is converted by typer.
_UNCONSTRAINED = {
    "min": None,
    "max": None,
    "clamp": False,
    "parser": None,
    "exists": False,
    "file_okay": True,
    "dir_okay": True,
    "writable": False,
    "readable": True,
    "resolve_path": False,
    "allow_dash": False,
    "path_type": None,
}


def _str(value: Any) -> Any:
    return value if type(value) is str else _TYPERS


def _int(value: Any) -> Any:
    if type(value) is int:
        return value
    return int(value) if type(value) is str and _INTEGER.fullmatch(value) else _TYPERS


def _float(value: Any) -> Any:
    if type(value) is float:
        return value
    return float(value) if type(value) is str and _DECIMAL.fullmatch(value) else _TYPERS


def _bool(value: Any) -> Any:
    return value if type(value) is bool else _TYPERS


def _path(value: Any) -> Any:
    """A Path, where typer would give the same: a path that is not there, or one it may read
    (typer refuses an unreadable one, in its own words)."""
    if not isinstance(value, str | Path) or value == "" or "\0" in str(value):
        return _TYPERS
    path = Path(value)
    try:
        os.stat(path)
    except OSError:
        return path
    return path if os.access(path, os.R_OK) else _TYPERS


def _strings(value: Any) -> Any:
    if isinstance(value, list | tuple) and all(type(item) is str for item in value):
        return list(value)
    return _TYPERS


_CONVERTERS: dict[Any, Callable[[Any], Any]] = {
    str: _str,
    int: _int,
    float: _float,
    bool: _bool,
    Path: _path,
    list[str]: _strings,
}


class PlainConversion:
    """What typer asks of a parameter's conversion (`coerce`), for one plain parameter."""

    def __init__(self, convert: Callable[[Any], Any], many: bool) -> None:
        self.convert = convert
        self.many = many

    def coerce(self, value: Any, param: Any, ctx: Any) -> Any:
        if value is None:
            return () if self.many else None
        converted = self.convert(value)
        if converted is not _TYPERS:
            return converted
        param._runtime_param = None  # typer's own, from now on
        return param.get_runtime_param().coerce(value, param=param, ctx=ctx)


def plain_conversion(param: Any) -> PlainConversion | None:
    """The conversion of `param` (a typer parameter) where it is plain; else None."""
    descriptor = getattr(param, "type_descriptor", None)
    if descriptor is None or getattr(param, "_runtime_param", False) is not None:
        return None  # typer's own already, or a typer without this hook
    if not hasattr(param, "get_runtime_param"):
        return None
    info = descriptor.parameter_info
    convert = _CONVERTERS.get(descriptor.annotation)
    if convert is None or descriptor.file_annotation is not None:
        return None
    if any(getattr(info, name, value) != value for name, value in _UNCONSTRAINED.items()):
        return None
    many = bool(param.multiple or param.nargs == -1)
    if many != (convert is _strings):
        return None
    return PlainConversion(convert, many)


def convert_plainly(params: Iterable[Any]) -> None:
    """Give each plain parameter of `params` its pydantic-free conversion (once)."""
    for param in params:
        conversion = plain_conversion(param)
        if conversion is not None:
            param._runtime_param = conversion
