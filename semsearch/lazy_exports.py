"""A package's names imported on first use: its `__init__` says which module holds each one and
imports none of them, so importing one light module of the package stays light."""

from __future__ import annotations

import importlib
from collections.abc import Callable


def lazy_getattr(package: str, exports: dict[str, str]) -> Callable[[str], object]:
    """The module `__getattr__` of `package`: `exports` maps each name to the module that
    defines it (absolute, or relative to `package` when it starts with a dot)."""

    def __getattr__(name: str) -> object:
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(exports[name], package), name)

    return __getattr__
