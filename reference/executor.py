"""Reference executor: runs `kn`/`tb` IR in numpy with Mirage's exact semantics.

`run_reference(module, inputs)` evaluates one kernel graph (a `func.func`) in float64 and is
the numerical oracle for the importer, the passes and the CUDA runtime.  Semantics follow
`docs/mirage-notes.md` sections 1.3-1.7:

* Kernel ops: batched matmul, elementwise unary ops (clamp with its *real* bounds), binary ops
  with equal-rank numpy broadcast, reduction with size > 1 over STRIDED groups
  (`out[..., j, ...] = sum_k in[..., j + k*size, ...]`), reduction_max over one dim to 1,
  causal_mask (element (i, j) of the last two dims kept where j <= i + offset, else -inf),
  rms_norm over the trailing normalized
  dims without epsilon, concat, chunk, reshape (row-major, numpy), all_reduce (identity on one
  GPU) and customized.
* `kn.customized` runs its threadblock graph for every block and every for-loop iteration,
  vectorised over the grid: a tile is an array `[gx, gy, gz, *tile]` (a block axis has size 1
  where the tile is replicated along it; numpy broadcasting does the rest) and tb ops act on
  the tile dims with an offset of 3.  Only the for-loop iterations are a Python loop.

The threadblock graphs run in `block_graph.py` (its docstring states the block execution
model); the elementwise math both levels share, and the storage rounding, is in
`numpy_ops.py`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from mirage_xdsl.reference.block_graph import run_customized
from mirage_xdsl.reference.numpy_ops import (
    BINARY,
    UNARY,
    ReferenceExecutionError,
    apply_unary,
    attention,
    causal_mask,
    check_shape,
    int_prop,
    rms_normalize,
    round_to_storage,
    strided_sum,
    value_shape,
)

__all__ = ["ReferenceExecutionError", "run_reference", "run_function"]


def _parse_text(text: str) -> Any:
    from xdsl.context import Context
    from xdsl.dialects.arith import Arith
    from xdsl.dialects.builtin import Builtin
    from xdsl.dialects.func import Func
    from xdsl.parser import Parser

    from mirage_xdsl.dialects.kn import Kernel
    from mirage_xdsl.dialects.tb import Threadblock

    ctx = Context()
    for dialect in (Builtin, Func, Arith, Kernel, Threadblock):
        ctx.load_dialect(dialect)
    return Parser(ctx, text).parse_module()


def _find_funcs(root: Any) -> list[Any]:
    from xdsl.dialects.builtin import ModuleOp
    from xdsl.dialects.func import FuncOp

    if isinstance(root, FuncOp):
        return [root]
    found: list[Any] = []

    def visit(module: ModuleOp) -> None:
        for op in module.ops:
            if isinstance(op, FuncOp):
                found.append(op)
            elif isinstance(op, ModuleOp):
                visit(op)

    if not isinstance(root, ModuleOp):
        raise ReferenceExecutionError(f"expected a builtin.module or func.func, got {type(root).__name__}")
    visit(root)
    return found


def run_reference(
    module: Any,
    inputs: Sequence[Any] | Mapping[str, Any],
    func_name: str | None = None,
    *,
    storage_rounding: bool = False,
) -> list[np.ndarray]:
    """Run one kernel graph of `module` on `inputs`; return its outputs as float64 arrays.

    Args:
        module: a `builtin.module` (or a `func.func`, or MLIR text) holding kernel graphs.
        inputs: one array-like per function argument, in order (or a mapping from argument
            names, as printed, to arrays); they are upcast to float64.
        func_name: the `func.func` to run; None selects the only function of the module.
        storage_rounding: round every op's result (kernel and threadblock ops, accumulator
            results) to its IR element type (fp16, bf16 round-to-nearest-even, fp32) before
            the next op reads it, as a kernel that stores each tile would.  The difference
            from the unrounded run estimates how much rounding alone moves the outputs
            (cancellation), which is what a comparison's tolerance must allow for.

    Raises:
        ReferenceExecutionError: no/ambiguous/unknown function, wrong inputs, unsupported op
            or an IR tiling inconsistency (see the module docstring).
    """
    if isinstance(module, str):
        module = _parse_text(module)
    funcs = [f for f in _find_funcs(module) if f.body.blocks]
    names = [f.sym_name.data for f in funcs]
    if func_name is None:
        if len(funcs) != 1:
            raise ReferenceExecutionError(
                f"the module has {len(funcs)} functions ({', '.join(names) or 'none'}); pass func_name"
            )
        func = funcs[0]
    else:
        matches = [f for f in funcs if f.sym_name.data == func_name]
        if not matches:
            raise ReferenceExecutionError(
                f"no function named '{func_name}'; available: {', '.join(names) or 'none'}"
            )
        func = matches[0]
    return run_function(func, inputs, storage_rounding=storage_rounding)


def run_function(
    func: Any, inputs: Sequence[Any] | Mapping[str, Any], *, storage_rounding: bool = False
) -> list[np.ndarray]:
    """Run a kernel-graph `func.func` (see `run_reference`)."""
    from xdsl.dialects.func import ReturnOp

    block = func.body.block
    args = block.args
    name = func.sym_name.data
    if isinstance(inputs, Mapping):
        arg_names = [a.name_hint or f"arg{i}" for i, a in enumerate(args)]
        missing = [n for n in arg_names if n not in inputs]
        extra = [n for n in inputs if n not in arg_names]
        if missing or extra:
            raise ReferenceExecutionError(
                f"@{name}: inputs by name must be exactly {arg_names}; missing {missing}, unexpected {extra}"
            )
        inputs = [inputs[n] for n in arg_names]
    inputs = list(inputs)
    if len(inputs) != len(args):
        raise ReferenceExecutionError(f"@{name} takes {len(args)} inputs, got {len(inputs)}")
    env: dict[Any, np.ndarray] = {}
    for i, (arg, value) in enumerate(zip(args, inputs)):
        arr = _to_numpy(value)
        if arr.dtype != np.float64:
            arr = arr.astype(np.float64)
        expected = value_shape(arg)
        if arr.shape != expected:
            label = f"%{arg.name_hint}" if arg.name_hint else f"#{i}"
            raise ReferenceExecutionError(
                f"@{name}: input {i} ({label}) has shape {arr.shape}, the function expects {expected}"
            )
        env[arg] = arr
    with np.errstate(all="ignore"):
        for op in block.ops:
            if isinstance(op, ReturnOp):
                return [np.asarray(env[v], dtype=np.float64) for v in op.arguments]
            results = _run_kn_op(op, [env[v] for v in op.operands], storage_rounding)
            if len(results) != len(op.results):
                raise ReferenceExecutionError(f"{op.name}: produced {len(results)} values for {len(op.results)} results")
            for res, arr in zip(op.results, results):
                check_shape(op, "result", arr.shape, value_shape(res))
                env[res] = round_to_storage(arr, res) if storage_rounding else arr
    raise ReferenceExecutionError(f"@{name} has no func.return")


def _to_numpy(value: Any) -> np.ndarray:
    """numpy view/copy of an array-like; device arrays (CuPy, torch CUDA) are copied to the host."""
    if hasattr(value, "__cuda_array_interface__"):
        if hasattr(value, "get"):  # CuPy
            return np.asarray(value.get())
        if hasattr(value, "cpu"):  # torch
            return np.asarray(value.detach().cpu().numpy())
    if hasattr(value, "detach") and hasattr(value, "numpy"):  # torch CPU tensor (incl. requires_grad)
        return np.asarray(value.detach().numpy())
    return np.asarray(value)


def _run_kn_op(op: Any, xs: list[np.ndarray], storage_rounding: bool = False) -> list[np.ndarray]:
    name = op.name
    if name == "contraction.contract":
        from mirage_xdsl.reference.contraction import run_contraction

        act = [(f.fn_name, f.values) for f in op.activation_fns]
        return [run_contraction(op.config(), xs[0], xs[1], value_shape(op.result), xs[2] if len(xs) > 2 else None, act)]
    if name == "contraction.permute":
        return [np.transpose(xs[0], op.perm())]
    if name == "cute.hopper_attention":
        offset = op.causal_offset.value.data if op.causal_offset is not None else None
        return [attention(xs[0], xs[1], xs[2], op.scale.value.data, offset)]
    if name == "cute.decode_attention":
        return [attention(xs[0], xs[1], xs[2], op.scale.value.data, None)]
    if not name.startswith("kn."):
        raise ReferenceExecutionError(f"unsupported operation '{name}' in a kernel graph")
    kind = name[3:]
    if kind in UNARY or kind in ("clamp", "mul_scalar", "add_scalar"):
        return [apply_unary(op, kind, xs[0])]
    if kind in BINARY:
        return [BINARY[kind](xs[0], xs[1])]
    if kind == "matmul":
        return [np.matmul(xs[0], xs[1])]
    if kind == "reduction":
        return [strided_sum(xs[0], int_prop(op, "dim"), int_prop(op, "size"))]
    if kind == "reduction_max":
        return [xs[0].max(axis=int_prop(op, "dim"), keepdims=True)]
    if kind == "causal_mask":
        return [causal_mask(xs[0], int_prop(op, "offset"))]
    if kind == "rms_norm":
        k = len(op.normalized_shape.get_values())
        x = xs[0]
        return [rms_normalize(x, range(x.ndim - k, x.ndim))]
    if kind == "concat":
        return [np.concatenate(xs, axis=int_prop(op, "dim"))]
    if kind == "reshape":
        return [xs[0].reshape(tuple(op.results[0].type.get_shape()))]  # type: ignore[attr-defined]
    if kind == "chunk":
        return list(np.split(xs[0], len(op.results), axis=int_prop(op, "dim")))
    if kind == "all_reduce":
        return [xs[0]]
    if kind == "customized":
        return run_customized(op, xs, storage_rounding)
    raise ReferenceExecutionError(f"unsupported kernel op '{name}'")
