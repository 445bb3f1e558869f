"""Runtime: load a typed `LaunchPlan` and its cubin, launch it through CuPy (eager, CUDA
graph, programmatic dependent launch), run library steps, and emulate kernels on the host.

    g = CompiledGraph(plan, cubin).load()          # driver/compile.py builds these
    outs = g(x, w)                                 # CuPy arrays or torch CUDA tensors

Names are imported lazily: `import mirage_xdsl.runtime` needs neither xDSL, CuPy nor nvcc.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY_EXPORTS: dict[str, str] = {
    "CompiledGraph": "mirage_xdsl.runtime.executable",
    "InputError": "mirage_xdsl.runtime.validate",
    "LaunchError": "mirage_xdsl.runtime.validate",
    "gpu_available": "mirage_xdsl.runtime.interop",
    "run_library_call": "mirage_xdsl.runtime.library_ops",
}

__all__ = sorted(_LAZY_EXPORTS)


def __getattr__(name: str) -> Any:
    """Import a lazily exported name on first access (module `__getattr__`, PEP 562).

    Raises:
        AttributeError: `name` is not one of the lazy exports.
    """
    module = _LAZY_EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'mirage_xdsl.runtime' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The module's names, the lazy exports included (PEP 562)."""
    return sorted(set(globals()) | set(_LAZY_EXPORTS))
