"""mirage_xdsl: Mirage's multi-level tensor-program compiler as an xDSL dialect stack."""

from __future__ import annotations

import importlib
from typing import Any

# Public names re-exported lazily (`import mirage_xdsl` stays cheap: no xDSL/numpy import).
_LAZY_EXPORTS: dict[str, str] = {
    "run_reference": "mirage_xdsl.reference.executor",
    "ReferenceExecutionError": "mirage_xdsl.reference.numpy_ops",
    "compile": "mirage_xdsl.driver.compile",
    "einsum": "mirage_xdsl.driver.einsum",
    "CompiledGraph": "mirage_xdsl.runtime.executable",
    "new_kernel_graph": "mirage_xdsl.frontends.builder",
    "new_threadblock_graph": "mirage_xdsl.frontends.tb_builder",
    "KNGraph": "mirage_xdsl.frontends.builder",
    "TBGraph": "mirage_xdsl.frontends.tb_builder",
    "DTensor": "mirage_xdsl.frontends.builder_common",
    "STensor": "mirage_xdsl.frontends.builder_common",
    "GraphBuildError": "mirage_xdsl.frontends.builder_common",
    "tc": "mirage_xdsl.frontends.tc",
    "TcError": "mirage_xdsl.frontends.tc",
}

__all__ = sorted(_LAZY_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _LAZY_EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'mirage_xdsl' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY_EXPORTS))
