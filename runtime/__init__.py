"""Runtime: nvcc compilation with a disk cache, launching plans through CuPy, the numpy
reference executor.

    import mirage_xdsl
    g = mirage_xdsl.compile(module, "graph_0")    # -> CompiledGraph
    outs = g(x, w)                                 # CuPy arrays or torch CUDA tensors

Names are imported lazily: `import mirage_xdsl.runtime` needs neither xDSL, CuPy nor nvcc.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY_EXPORTS: dict[str, str] = {
    "compile": "mirage_xdsl.runtime.executable",
    "prepare": "mirage_xdsl.runtime.executable",
    "CompiledGraph": "mirage_xdsl.runtime.executable",
    "InputError": "mirage_xdsl.runtime.executable",
    "LaunchError": "mirage_xdsl.runtime.executable",
    "gpu_available": "mirage_xdsl.runtime.executable",
    "compile_cuda": "mirage_xdsl.runtime.compiler",
    "CudaCompileError": "mirage_xdsl.runtime.compiler",
    "NvccNotFoundError": "mirage_xdsl.runtime.compiler",
    "run_library_call": "mirage_xdsl.runtime.library_ops",
    "run_reference": "mirage_xdsl.runtime.reference",
    "ReferenceExecutionError": "mirage_xdsl.runtime.reference",
}

__all__ = sorted(_LAZY_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _LAZY_EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'mirage_xdsl.runtime' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY_EXPORTS))
