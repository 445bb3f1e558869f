"""Reading a kernel graph from disk: a muGraph JSON file (Mirage's saved format), a Tensor
Comprehensions file (`.tc`, sizes from its `# sizes:` line) or textual IR, into a verified
`builtin.module`."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any


class ModuleLoadError(ValueError):
    """The file is missing or does not hold a `builtin.module`; the message names the file."""


def load_module(path: Path, era: str | None = None, sizes: Mapping[str, int] | None = None) -> Any:
    """A verified `builtin.module` from a muGraph JSON file (`.json`), a Tensor Comprehensions
    file (`.tc`: every definition, frontends/tc/files.py `tc_file`) or textual IR (anything else).

    Args:
        path: the file.
        era: for muGraph files, which Mirage JSON layout to read (see `frontends/mugraph_schema.py`).
        sizes: for `.tc` files, sizes that override those of the file's `# sizes:` line
            (`--tc-sizes`); must be None or empty for other files.

    Raises:
        ModuleLoadError: no such file, the IR's top-level op is not a `builtin.module`, or
            `sizes` given for a file that is not `.tc`.
        TcError: a `.tc` file that does not parse, check or lower, or a size that neither its
            sizes line nor `sizes` gives (located, one line).
        ParseError, VerifyException, MugraphError: the file does not parse or verify (their
            messages carry the location); VerifyException also for the module-level checks of
            `dialects/kn/graph_verify.py` (dominance, signature tensors and strides).
        NestingError: the IR nests brackets deeper than target/device.py `MAX_NESTING_DEPTH`.
    """
    if not path.is_file():
        raise ModuleLoadError(f"{path}: no such file")
    suffix = path.suffix.lower()
    if sizes and suffix != ".tc":
        raise ModuleLoadError(f"{path}: sizes (--tc-sizes) apply to Tensor Comprehensions files (.tc) only")
    if suffix == ".tc":
        return _load_tc(path, sizes)
    if suffix == ".json":
        from mirage_xdsl.frontends.mugraph_import import load_mugraph_file

        return load_mugraph_file(path, era=era)
    from xdsl.dialects.builtin import ModuleOp
    from xdsl.parser import Parser

    from mirage_xdsl.dialects.kn.graph_verify import verify_kernel_graphs
    from mirage_xdsl.driver.compile import make_context
    from mirage_xdsl.frontends.nesting import check_nesting

    text = path.read_text()
    check_nesting(text, str(path))
    module = Parser(make_context(), text, str(path)).parse_module()
    if not isinstance(module, ModuleOp):
        raise ModuleLoadError(f"{path}: expected a builtin.module")
    module.verify()
    verify_kernel_graphs(module)
    return module


def _load_tc(path: Path, sizes: Mapping[str, int] | None) -> Any:
    from mirage_xdsl.dialects.kn.graph_verify import verify_kernel_graphs
    from mirage_xdsl.frontends.tc.files import tc_file

    module = tc_file(path.read_text(), str(path), sizes)
    module.verify()
    verify_kernel_graphs(module)
    return module


def functions(module: Any) -> list[Any]:
    """The `func.func` ops at the top level of `module`, in order (one kernel graph each)."""
    from xdsl.dialects.func import FuncOp

    return [op for op in module.body.block.ops if isinstance(op, FuncOp)]


def select_function(module: Any, func_name: str | None) -> Any:
    """The `func.func` named `func_name` in `module` (or `module` itself when it is a function),
    or its only function when `func_name` is None.

    Raises:
        ValueError: no function of that name, or several and no `func_name` (the message
            lists the names).
    """
    from xdsl.dialects.builtin import ModuleOp

    funcs = functions(module) if isinstance(module, ModuleOp) else [module]
    names = [f.sym_name.data for f in funcs]
    if func_name is None:
        if len(funcs) != 1:
            listed = ", ".join(names[:8]) + (", ..." if len(names) > 8 else "")
            raise ValueError(f"the module has {len(funcs)} functions ({listed}); pass func_name")
        return funcs[0]
    if func_name not in names:
        raise ValueError(f"no function named '{func_name}'; available: {', '.join(names) or 'none'}")
    return funcs[names.index(func_name)]
