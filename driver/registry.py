"""Registries of our dialects, targets and frontends (lazy factories, xDSL's convention)."""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from typing import Any

from xdsl.ir import Dialect
from xdsl.utils.target import Target


def _lazy(module: str, name: str) -> Callable[[], Any]:
    return lambda: getattr(importlib.import_module(module), name)


def get_all_dialects() -> dict[str, Callable[[], Dialect]]:
    """Dialect name -> factory: `kn`, `tb`, `cute`, `contraction` and `mpk`."""
    return {
        "kn": _lazy("mirage_xdsl.dialects.kn", "Kernel"),
        "tb": _lazy("mirage_xdsl.dialects.tb", "Threadblock"),
        "cute": _lazy("mirage_xdsl.dialects.cute", "Cute"),
        "contraction": _lazy("mirage_xdsl.dialects.contraction.ops", "Contraction"),
        "mpk": _lazy("mirage_xdsl.dialects.mpk", "Mpk"),
    }


# target name -> (module, class)
TARGET_MODULES: dict[str, tuple[str, str]] = {
    "mugraph": ("mirage_xdsl.frontends.mugraph_target", "MugraphTarget"),
    "cuda": ("mirage_xdsl.codegen.cuda_target", "CudaTarget"),
}


def get_all_targets() -> dict[str, Callable[[], type[Target]]]:
    """Target name -> factory of the target class, for every target whose module exists."""
    targets: dict[str, Callable[[], type[Target]]] = {}
    for name, (module, cls) in TARGET_MODULES.items():
        if importlib.util.find_spec(module) is not None:
            targets[name] = _lazy(module, cls)
    return targets
