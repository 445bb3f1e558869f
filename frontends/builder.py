"""Python builder API for kernel graphs, in the spirit of Mirage's `mirage` module.

    import mirage_xdsl as mx
    g = mx.new_kernel_graph()
    X = g.new_input(dims=(2, 4096), dtype="float16")
    W = g.new_input(dims=(4096, 6144), dtype="float16")
    tb = mx.new_threadblock_graph(grid_dim=(256, 1, 1), forloop_range=32)
    tX = tb.new_input(X, input_map=(-1, -1, -1), forloop_dim=1)
    tW = tb.new_input(W, input_map=(1, -1, -1), forloop_dim=0)
    tR = tb.forloop_accum(tX, "rms")
    tM = tb.forloop_accum(tb.matmul(tX, tW))
    tb.new_output(tb.div(tM, tR), output_map=(1, -1, -1))
    (O,) = g.customized([X, W], tb)
    g.mark_output(O)
    module = g.module            # builtin.module with one verified func.func

Graphs are built eagerly into xDSL IR (`kn`/`tb` ops); every shape rule of
`dialects/tiling.py` is checked when an op is added, and a violation raises
`GraphBuildError` (a `ValueError`) whose message starts with the op's name, e.g.
`matmul: contraction dims differ: lhs[-1] = 64 vs rhs[-2] = 128`.

Differences from Mirage's Python API: tensors are handles on SSA values (no data), `dtype`
is a string (`"float16"`, `"bfloat16"`, `"float32"`, `"float64"`) or an xDSL type; the
customized op's `inputs` must list the DTensors in the order of the block graph's
`new_input` calls (Mirage binds them positionally too).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any

from xdsl.dialects.builtin import (
    ArrayAttr,
    BFloat16Type,
    DictionaryAttr,
    Float16Type,
    Float32Type,
    Float64Type,
    ModuleOp,
    TensorType,
    UnitAttr,
    bf16,
    f16,
    f32,
    f64,
)
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.utils.exceptions import VerifyException

from mirage_xdsl.dialects import kn, tb, tiling
from mirage_xdsl.dialects.kn.graph_verify import strides_error, verify_kernel_graphs
from mirage_xdsl.target.device import MAX_FORLOOP_RANGE, MAX_TENSOR_ELEMENTS

__all__ = [
    "DTensor",
    "GraphBuildError",
    "KNGraph",
    "STensor",
    "TBGraph",
    "new_kernel_graph",
    "new_threadblock_graph",
]


class GraphBuildError(ValueError):
    """A builder call breaks a shape or graph rule; the message starts with the op's name."""


DTYPES: dict[str, Attribute] = {
    "float16": f16,
    "half": f16,
    "fp16": f16,
    "bfloat16": bf16,
    "bf16": bf16,
    "float32": f32,
    "float": f32,
    "fp32": f32,
    "float64": f64,
    "double": f64,
}
_DTYPE_NAMES: dict[type[Attribute], str] = {
    Float16Type: "float16",
    BFloat16Type: "bfloat16",
    Float32Type: "float32",
    Float64Type: "float64",
}


def _show(value: Any) -> str:
    """`value` for an error message: plain data as written, other objects by type name (their
    default repr, `<... object at 0x...>`, tells a user nothing)."""
    if value is None or isinstance(value, bool | int | float | str | _Tensor):
        return repr(value)
    if isinstance(value, list | tuple) and all(v is None or isinstance(v, bool | int | float | str) for v in value):
        return repr(value)
    return f"a {type(value).__name__}"


def _dtype(dtype: Any, name: str = "new_input") -> Attribute:
    if isinstance(dtype, Attribute):
        if (err := kn.element_type_error(dtype)) is not None:
            raise GraphBuildError(f"{name}: dtype: {err}")
        return dtype
    key = getattr(dtype, "name", dtype)  # torch / Mirage dtype objects carry a name
    if not isinstance(key, str) or key.lower().removeprefix("torch.").removeprefix("mi.") not in DTYPES:
        raise GraphBuildError(f"{name}: unknown dtype {_show(dtype)} (expected one of {', '.join(sorted(set(DTYPES)))})")
    return DTYPES[key.lower().removeprefix("torch.").removeprefix("mi.")]


def _dtype_name(attr: Attribute) -> str:
    return _DTYPE_NAMES.get(type(attr), str(attr))


def _is_int(value: Any) -> bool:
    # bool is an int subclass, but True as a size is a typo, not a 1
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _int(name: str, what: str, value: Any, lo: int | None = None, hi: int | None = None) -> int:
    """`value` as a Python int within [lo, hi].

    Raises:
        GraphBuildError: `value` is not an int (floats and bools are refused, not truncated)
            or lies outside the range.
    """
    if not _is_int(value):
        raise GraphBuildError(f"{name}: {what} must be an int, got {_show(value)}")
    out = int(value)
    if (lo is not None and out < lo) or (hi is not None and out > hi):
        bounds = f">= {lo}" if hi is None else f"in [{lo if lo is not None else '-inf'}, {hi}]"
        raise GraphBuildError(f"{name}: {what} must be {bounds}, got {out}")
    return out


def _ints(name: str, what: str, values: Any, length: int | None = None) -> tuple[int, ...]:
    """A list or tuple of ints (not bools or floats) as a tuple, of `length` entries if given.

    Raises:
        GraphBuildError: `values` is not a list/tuple of ints or has the wrong length.
    """
    iterable = hasattr(values, "__iter__") and not isinstance(values, str | bytes | Mapping | AbstractSet)
    items = list(values) if iterable else None
    if items is None or not all(_is_int(v) for v in items):
        raise GraphBuildError(f"{name}: {what} must be a list or tuple of ints, got {_show(values)}")
    out = tuple(int(v) for v in items)
    if length is not None and len(out) != length:
        raise GraphBuildError(f"{name}: {what} must have {length} entries, got {len(out)}")
    return out


def _number(name: str, what: str, value: Any) -> float:
    """`value` as a finite-or-infinite Python float (ints and floats only, not bools or text).

    Raises:
        GraphBuildError: `value` is not a real number, or is NaN.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or math.isnan(float(value)):
        raise GraphBuildError(f"{name}: {what} must be a number, got {_show(value)}")
    return float(value)


def _dims(name: str, dims: Any) -> tuple[int, ...]:
    """A tensor shape: 1 to MAX_TENSOR_DIMS positive ints with fewer than 2^31 elements.

    Raises:
        GraphBuildError: `dims` is not such a list/tuple of ints.
    """
    shape = _ints(name, "dims", dims)
    if not 1 <= len(shape) <= tiling.MAX_TENSOR_DIMS or any(d < 1 for d in shape):
        raise GraphBuildError(f"{name}: dims must be 1..{tiling.MAX_TENSOR_DIMS} positive sizes, got {shape}")
    if math.prod(shape) > MAX_TENSOR_ELEMENTS:
        raise GraphBuildError(
            f"{name}: dims {shape} hold {math.prod(shape)} elements, more than the {MAX_TENSOR_ELEMENTS} that "
            "32-bit indexing in the generated kernels reaches; split the tensor"
        )
    return shape


def _checked(name: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
    """Call a `tiling` shape rule, re-raising its ShapeError as a GraphBuildError naming the op."""
    try:
        return fn(*args, **kwargs)
    except tiling.ShapeError as err:
        raise GraphBuildError(f"{name}: {err}") from None


class _Tensor:
    value: SSAValue

    @property
    def dims(self) -> tuple[int, ...]:
        return kn.shape_of(self.value)

    @property
    def num_dims(self) -> int:
        return len(self.dims)

    @property
    def dtype(self) -> str:
        return _dtype_name(kn.element_type_of(self.value))

    def dim(self, i: int) -> int:
        return self.dims[i]


class DTensor(_Tensor):
    """A device tensor of a `KNGraph` (a graph input or an op result)."""

    def __init__(self, graph: KNGraph, value: SSAValue):
        self.graph = graph
        self.value = value

    def __repr__(self) -> str:
        return f"DTensor(dims={self.dims}, dtype={self.dtype})"


class STensor(_Tensor):
    """A shared-memory tile of a `TBGraph`."""

    def __init__(self, graph: TBGraph, value: SSAValue):
        self.graph = graph
        self.value = value

    @property
    def after_accum(self) -> bool:
        return tb.after_accum(self.value)

    def __repr__(self) -> str:
        return f"STensor(dims={self.dims}, dtype={self.dtype}, after_accum={self.after_accum})"


# ---------------------------------------------------------------------------------------
# Kernel graph


class KNGraph:
    """A kernel graph under construction (Mirage `KNGraph`)."""

    def __init__(self, name: str = "graph"):
        self.func_name = name
        self._region = Region(Block())
        self._block = self._region.block
        self._arg_strides: list[tuple[int, ...]] = []
        self._arg_weights: list[bool] = []
        self._outputs: list[tuple[DTensor, tuple[int, ...] | None]] = []

    # ---- helpers
    def _own(self, name: str, *tensors: Any) -> list[SSAValue]:
        values = []
        for t in tensors:
            if not isinstance(t, DTensor):
                raise GraphBuildError(f"{name}: expected a DTensor of this kernel graph, got {type(t).__name__}")
            if t.graph is not self:
                raise GraphBuildError(f"{name}: the DTensor belongs to another kernel graph")
            values.append(t.value)
        return values

    def _add(self, op: Operation) -> list[DTensor]:
        self._block.add_op(op)
        return [DTensor(self, r) for r in op.results]

    def _same_dtype(self, name: str, a: SSAValue, b: SSAValue) -> None:
        if kn.element_type_of(a) != kn.element_type_of(b):
            raise GraphBuildError(
                f"{name}: operands have different dtypes ({kn.element_type_of(a)} vs {kn.element_type_of(b)})"
            )

    # ---- inputs / outputs
    def new_input(
        self,
        dims: Sequence[int],
        strides: Sequence[int] | None = None,
        dtype: Any = "float16",
        name: str | None = None,
        weight: bool = False,
    ) -> DTensor:
        """A graph input; `strides` in elements, outermost first (default row-major).
        `weight=True` marks it `kn.weight`: nothing queued on the stream before a launch
        writes it, so the kernels may prefetch it (dialects/kn/tensors.py `WEIGHT_ATTR`)."""
        shape = _dims("new_input", dims)
        st = tiling.row_major_strides(shape) if strides is None else _ints("new_input", "strides", strides)
        if len(st) != len(shape) or any(s < 0 for s in st):
            raise GraphBuildError(f"new_input: strides {st} must be {len(shape)} non-negative ints for dims {shape}")
        if (err := strides_error(st, shape, output=False)) is not None:
            raise GraphBuildError(f"new_input: strides {list(st)} {err}")
        if name is not None and not isinstance(name, str):
            raise GraphBuildError(f"new_input: name must be a string or None, got {_show(name)}")
        if not isinstance(weight, bool):
            raise GraphBuildError(f"new_input: weight must be True or False, got {_show(weight)}")
        arg = self._block.insert_arg(TensorType(_dtype(dtype), shape), len(self._block.args))
        if name is not None:
            arg.name_hint = name
        self._arg_strides.append(st)
        self._arg_weights.append(bool(weight))
        return DTensor(self, arg)

    def mark_output(self, A: DTensor, strides: Sequence[int] | None = None) -> None:
        """Make `A` a graph output; `strides` None lets the compiler choose the layout."""
        self._own("mark_output", A)
        st = None
        if strides is not None:
            st = _ints("mark_output", "strides", strides)
            if len(st) != A.num_dims:
                raise GraphBuildError(f"mark_output: strides {st} must have one entry per dim of {A.dims}")
            if (err := strides_error(st, A.dims, output=True)) is not None:
                raise GraphBuildError(f"mark_output: strides {list(st)} {err}")
        self._outputs.append((A, st))

    # ---- elementwise
    def _unary(self, name: str, cls: type, A: DTensor, *args: Any) -> DTensor:
        (a,) = self._own(name, A)
        return self._add(cls(a, *args))[0]

    def exp(self, A: DTensor) -> DTensor:
        return self._unary("exp", kn.ExpOp, A)

    def square(self, A: DTensor) -> DTensor:
        return self._unary("square", kn.SquareOp, A)

    def sqrt(self, A: DTensor) -> DTensor:
        return self._unary("sqrt", kn.SqrtOp, A)

    def silu(self, A: DTensor) -> DTensor:
        return self._unary("silu", kn.SiluOp, A)

    def sigmoid(self, A: DTensor) -> DTensor:
        return self._unary("sigmoid", kn.SigmoidOp, A)

    def gelu(self, A: DTensor) -> DTensor:
        return self._unary("gelu", kn.GeluOp, A)

    def relu(self, A: DTensor) -> DTensor:
        return self._unary("relu", kn.ReluOp, A)

    def log(self, A: DTensor) -> DTensor:
        return self._unary("log", kn.LogOp, A)

    def clamp(self, A: DTensor, min_value: float, max_value: float) -> DTensor:
        lo, hi = _number("clamp", "min_value", min_value), _number("clamp", "max_value", max_value)
        if lo > hi:
            raise GraphBuildError(f"clamp: min {lo} exceeds max {hi}")
        return self._unary("clamp", kn.ClampOp, A, lo, hi)

    def mul_scalar(self, A: DTensor, scalar: float) -> DTensor:
        return self._unary("mul_scalar", kn.MulScalarOp, A, _number("mul_scalar", "scalar", scalar))

    def _binary(self, name: str, cls: type, A: DTensor, B: DTensor) -> DTensor:
        a, b = self._own(name, A, B)
        self._same_dtype(name, a, b)
        _checked(name, tiling.broadcast_shape, kn.shape_of(a), kn.shape_of(b))
        return self._add(cls(a, b))[0]

    def add(self, A: DTensor, B: DTensor) -> DTensor:
        return self._binary("add", kn.AddOp, A, B)

    def sub(self, A: DTensor, B: DTensor) -> DTensor:
        return self._binary("sub", kn.SubOp, A, B)

    def mul(self, A: DTensor, B: DTensor) -> DTensor:
        return self._binary("mul", kn.MulOp, A, B)

    def div(self, A: DTensor, B: DTensor) -> DTensor:
        return self._binary("div", kn.DivOp, A, B)

    def pow(self, A: DTensor, B: DTensor) -> DTensor:
        return self._binary("pow", kn.PowOp, A, B)

    # ---- structured
    def matmul(self, A: DTensor, B: DTensor) -> DTensor:
        a, b = self._own("matmul", A, B)
        self._same_dtype("matmul", a, b)
        _checked("matmul", tiling.matmul_shape, kn.shape_of(a), kn.shape_of(b), threadblock=False)
        return self._add(kn.MatmulOp(a, b))[0]

    def reduction(self, A: DTensor, dim: int, size: int = 1) -> DTensor:
        """Sum `dim` down to `size` (strided groups when size > 1)."""
        (a,) = self._own("reduction", A)
        dim, size = _int("reduction", "dim", dim), _int("reduction", "size", size)
        _checked("reduction", tiling.reduction_shape, kn.shape_of(a), dim, size)
        return self._add(kn.ReductionOp(a, dim, size))[0]

    def reduction_max(self, A: DTensor, dim: int) -> DTensor:
        """Max over `dim` down to 1 (`kn.reduction_max`: the row max of a stable softmax).

        Raises:
            GraphBuildError: `A` is not a tensor of this graph, or `dim` is not one of its dims.
        """
        (a,) = self._own("reduction_max", A)
        dim = _int("reduction_max", "dim", dim)
        _checked("reduction_max", tiling.reduction_shape, kn.shape_of(a), dim, 1)
        return self._add(kn.ReductionMaxOp(a, dim))[0]

    def rms_norm(self, A: DTensor, normalized_shape: Sequence[int]) -> DTensor:
        (a,) = self._own("rms_norm", A)
        norm = _ints("rms_norm", "normalized_shape", normalized_shape)
        shape = kn.shape_of(a)
        if not norm or len(norm) > len(shape) or shape[len(shape) - len(norm) :] != norm:
            raise GraphBuildError(f"rms_norm: normalized_shape {norm} must equal the trailing dims of {shape}")
        return self._add(kn.RmsNormOp(a, norm))[0]

    def concat(self, A: DTensor, B: DTensor, dim: int) -> DTensor:
        a, b = self._own("concat", A, B)
        self._same_dtype("concat", a, b)
        dim = _int("concat", "dim", dim)
        _checked("concat", tiling.concat_shape, kn.shape_of(a), kn.shape_of(b), dim)
        return self._add(kn.ConcatOp(a, b, dim))[0]

    def chunk(self, A: DTensor, chunks: int, dim: int) -> list[DTensor]:
        """Split `dim` into `chunks` equal parts."""
        (a,) = self._own("chunk", A)
        shape = kn.shape_of(a)
        dim, chunks = _int("chunk", "dim", dim), _int("chunk", "chunks", chunks)
        if not 0 <= dim < len(shape):
            raise GraphBuildError(f"chunk: dim {dim} is not a dimension of a rank-{len(shape)} tensor")
        if chunks < 1 or shape[dim] % chunks:
            raise GraphBuildError(f"chunk: dim {dim} (size {shape[dim]}) is not divisible into {chunks} chunks")
        return self._add(kn.ChunkOp(a, chunks, dim))

    def all_reduce(self, A: DTensor, inplace: bool = False) -> DTensor:
        if not isinstance(inplace, bool):
            raise GraphBuildError(f"all_reduce: inplace must be True or False, got {_show(inplace)}")
        return self._unary("all_reduce", kn.AllReduceOp, A, inplace)

    def customized(self, inputs: Sequence[DTensor], bgraph: TBGraph) -> list[DTensor]:
        """A graph-defined kernel; returns one DTensor per `new_output` of `bgraph`, in order."""
        if isinstance(inputs, str | bytes) or not isinstance(inputs, Sequence):
            raise GraphBuildError(f"customized: inputs must be a list of DTensors, got {_show(inputs)}")
        values = self._own("customized", *inputs)
        if not isinstance(bgraph, TBGraph):
            raise GraphBuildError(f"customized: expected a TBGraph, got {type(bgraph).__name__}")
        expected = bgraph._inputs
        if len(values) != len(expected) or any(v is not e.value for v, e in zip(values, expected)):
            raise GraphBuildError(
                f"customized: inputs must be the block graph's new_input DTensors in order "
                f"({len(expected)} expected, {len(values)} given)"
            )
        out_ops = [op for op in bgraph._block.ops if isinstance(op, tb.OutputOp)]
        if not out_ops:
            raise GraphBuildError("customized: the block graph has no new_output")
        out_types = []
        for i, out in enumerate(out_ops):
            shape = _checked(f"customized (output {i})", tiling.output_dtensor_shape,
                             kn.shape_of(out.input), bgraph.grid_dim, out.omap)
            out_types.append(TensorType(kn.element_type_of(out.input), shape))
        body = bgraph._region.clone()
        op = kn.CustomizedOp(
            values,
            out_types,
            body,
            grid_dim=bgraph.grid_dim,
            block_dim=bgraph.block_dim,
            forloop_range=bgraph.forloop_range,
            reduction_dimx=bgraph.reduction_dimx,
        )
        return self._add(op)

    # ---- results
    @property
    def module(self) -> ModuleOp:
        """A fresh, verified `builtin.module` holding the graph as one `func.func`."""
        mapper: dict[SSAValue, SSAValue] = {}
        region = Region()
        self._region.clone_into(region, value_mapper=mapper)
        block = region.block
        results = [mapper.get(t.value, t.value) for t, _ in self._outputs]
        block.add_op(ReturnOp(*results))
        arg_attrs = ArrayAttr(
            [
                DictionaryAttr({kn.STRIDES_ATTR: kn.int_array(st)} | ({kn.WEIGHT_ATTR: UnitAttr()} if weight else {}))
                for st, weight in zip(self._arg_strides, self._arg_weights)
            ]
        )
        res_attrs = ArrayAttr(
            [DictionaryAttr({} if st is None else {kn.STRIDES_ATTR: kn.int_array(st)}) for _, st in self._outputs]
        )
        func = FuncOp(
            self.func_name,
            (list(block.arg_types), [r.type for r in results]),
            region,
            arg_attrs=arg_attrs,
            res_attrs=res_attrs,
        )
        module = ModuleOp([func])
        try:
            module.verify()
            verify_kernel_graphs(module)
        except VerifyException as err:
            raise GraphBuildError(f"module: {str(err).splitlines()[0]}") from None
        return module

    def to_mlir(self) -> str:
        """The module as MLIR text."""
        return str(self.module)

    def __call__(self, inputs: Sequence[Any]) -> list[Any]:
        """Evaluate the graph with the numpy reference executor (float64)."""
        from mirage_xdsl.reference.executor import run_reference

        return run_reference(self.module, inputs)


# ---------------------------------------------------------------------------------------
# Threadblock graph

_ACC_KINDS = {
    None: "nored",
    "sum": "red_ld_sum",
    "mean": "red_ld_mean",
    "rms": "red_ld_rms",
    "sum_todimx": "redtox_ld_sum",
    "max": "max",
}
_RESCALE_KINDS = {None: "nored_rescale", "sum": "red_ld_sum_rescale"}


class TBGraph:
    """A threadblock graph under construction (Mirage `TBGraph`), used by `KNGraph.customized`."""

    def __init__(
        self,
        grid_dim: Sequence[int],
        block_dim: Sequence[int] = (128, 1, 1),
        forloop_range: int = 1,
        reduction_dimx: int = 64,
    ):
        name = "new_threadblock_graph"
        self.grid_dim = _ints(name, "grid_dim", grid_dim, 3)
        self.block_dim = _ints(name, "block_dim", block_dim, 3)
        if any(g < 1 for g in self.grid_dim) or any(b < 1 for b in self.block_dim):
            raise GraphBuildError(f"{name}: grid_dim and block_dim must be positive, got {self.grid_dim}, {self.block_dim}")
        threads = self.block_dim[0] * self.block_dim[1] * self.block_dim[2]
        if threads > tiling.MAX_THREADS_PER_BLOCK:
            raise GraphBuildError(f"{name}: block_dim {self.block_dim} has {threads} threads (max {tiling.MAX_THREADS_PER_BLOCK})")
        if (err := tiling.launch_geometry_error(self.grid_dim, self.block_dim)) is not None:
            raise GraphBuildError(f"{name}: {err}")  # the per-axis limits
        self.forloop_range = _int(name, "forloop_range", forloop_range, 1, MAX_FORLOOP_RANGE)
        self.reduction_dimx = _int(name, "reduction_dimx", reduction_dimx, 1, MAX_TENSOR_ELEMENTS)
        self._region = Region(Block())
        self._block = self._region.block
        self._inputs: list[DTensor] = []

    # ---- helpers
    def _own(self, name: str, *tensors: Any) -> list[SSAValue]:
        values = []
        for t in tensors:
            if not isinstance(t, STensor) or t.graph is not self:
                raise GraphBuildError(f"{name}: expected an STensor of this threadblock graph, got {_show(t)}")
            values.append(t.value)
        return values

    def _add(self, op: Operation) -> list[STensor]:
        self._block.add_op(op)
        return [STensor(self, r) for r in op.results]

    @staticmethod
    def _same_phase(name: str, a: SSAValue, b: SSAValue) -> None:
        if tb.after_accum(a) != tb.after_accum(b):
            raise GraphBuildError(
                f"{name}: operands must agree on after_accum (one is computed inside the for-loop, "
                "the other after a forloop accumulator)"
            )
        if kn.element_type_of(a) != kn.element_type_of(b):
            raise GraphBuildError(f"{name}: operands have different dtypes")

    # ---- loads and stores
    def new_input(self, dtensor: DTensor, input_map: Sequence[int], forloop_dim: int) -> STensor:
        """Load `dtensor` tile-wise: `input_map` (x, y, z) dims partitioned by the grid
        (-1 = replicate), `forloop_dim` the dim walked by the for-loop (-1 = loaded once)."""
        if not isinstance(dtensor, DTensor):
            raise GraphBuildError(f"new_input: expected a DTensor, got {type(dtensor).__name__}")
        imap = _ints("new_input", "input_map", input_map, 3)
        forloop_dim = _int("new_input", "forloop_dim", forloop_dim)
        tile = _checked(
            "new_input", tiling.input_tile_shape, dtensor.dims, self.grid_dim, imap, forloop_dim, self.forloop_range
        )
        arg = self._block.insert_arg(dtensor.value.type, len(self._block.args))
        if dtensor.value.name_hint:
            arg.name_hint = dtensor.value.name_hint.lower()
        self._inputs.append(dtensor)
        return self._add(tb.InputOp(arg, imap, forloop_dim, tile))[0]

    def new_output(self, stensor: STensor, output_map: Sequence[int], forloop_dim: int = -1) -> None:
        """Store every block's tile, concatenated along `output_map` (x, y, z)."""
        (s,) = self._own("new_output", stensor)
        if _int("new_output", "forloop_dim", forloop_dim) != -1:
            raise GraphBuildError("new_output: forloop_dim must be -1 (outputs are stored after the for-loop)")
        if not tb.after_accum(s):
            raise GraphBuildError(
                "new_output: the stored tile must be after_accum (pass it through a forloop accumulator)"
            )
        omap = _ints("new_output", "output_map", output_map, 3)
        _checked("new_output", tiling.output_dtensor_shape, kn.shape_of(s), self.grid_dim, omap)
        self._block.add_op(tb.OutputOp(s, omap))

    # ---- elementwise
    def _unary(self, name: str, cls: type, A: STensor, *args: Any) -> STensor:
        (a,) = self._own(name, A)
        return self._add(cls(a, *args))[0]

    def exp(self, A: STensor) -> STensor:
        return self._unary("exp", tb.ExpOp, A)

    def square(self, A: STensor) -> STensor:
        return self._unary("square", tb.SquareOp, A)

    def sqrt(self, A: STensor) -> STensor:
        return self._unary("sqrt", tb.SqrtOp, A)

    def silu(self, A: STensor) -> STensor:
        return self._unary("silu", tb.SiluOp, A)

    def sigmoid(self, A: STensor) -> STensor:
        return self._unary("sigmoid", tb.SigmoidOp, A)

    def gelu(self, A: STensor) -> STensor:
        return self._unary("gelu", tb.GeluOp, A)

    def relu(self, A: STensor) -> STensor:
        return self._unary("relu", tb.ReluOp, A)

    def log(self, A: STensor) -> STensor:
        return self._unary("log", tb.LogOp, A)

    def clamp(self, A: STensor, min_value: float, max_value: float) -> STensor:
        lo, hi = _number("clamp", "min_value", min_value), _number("clamp", "max_value", max_value)
        if lo > hi:
            raise GraphBuildError(f"clamp: min {lo} exceeds max {hi}")
        return self._unary("clamp", tb.ClampOp, A, lo, hi)

    def mul_scalar(self, A: STensor, scalar: float) -> STensor:
        return self._unary("mul_scalar", tb.MulScalarOp, A, _number("mul_scalar", "scalar", scalar))

    def _binary(self, name: str, cls: type[tb.TbBinaryOp] | type[tb.MatmulOp], A: STensor, B: STensor) -> STensor:
        a, b = self._own(name, A, B)
        self._same_phase(name, a, b)
        _checked(name, cls.infer_shape, kn.shape_of(a), kn.shape_of(b))
        return self._add(cls(a, b))[0]

    def add(self, A: STensor, B: STensor) -> STensor:
        return self._binary("add", tb.AddOp, A, B)

    def sub(self, A: STensor, B: STensor) -> STensor:
        return self._binary("sub", tb.SubOp, A, B)

    def mul(self, A: STensor, B: STensor) -> STensor:
        return self._binary("mul", tb.MulOp, A, B)

    def div(self, A: STensor, B: STensor) -> STensor:
        return self._binary("div", tb.DivOp, A, B)

    def pow(self, A: STensor, B: STensor) -> STensor:
        return self._binary("pow", tb.PowOp, A, B)

    def matmul(self, A: STensor, B: STensor) -> STensor:
        return self._binary("matmul", tb.MatmulOp, A, B)

    # ---- reductions, norms, concat
    def reduction(self, A: STensor, dim: int) -> STensor:
        """Sum `dim` down to 1."""
        (a,) = self._own("reduction", A)
        dim = _int("reduction", "dim", dim)
        _checked("reduction", tiling.reduction_shape, kn.shape_of(a), dim, 1)
        return self._add(tb.ReductionOp(a, dim))[0]

    def reduce_max(self, A: STensor, dim: int) -> STensor:
        """Max over `dim` of this tile down to 1, no state across calls (`tb.reduce_max`).

        Raises:
            GraphBuildError: `A` is not a tile of this graph, or `dim` is not one of its dims.
        """
        (a,) = self._own("reduce_max", A)
        dim = _int("reduce_max", "dim", dim)
        _checked("reduce_max", tiling.reduction_shape, kn.shape_of(a), dim, 1)
        return self._add(tb.ReduceMaxOp(a, dim))[0]

    def reduction_to_dimx(self, A: STensor, dim: int) -> STensor:
        """Sum strided groups of `dim` down to the graph's `reduction_dimx`."""
        (a,) = self._own("reduction_to_dimx", A)
        dim = _int("reduction_to_dimx", "dim", dim)
        _checked("reduction_to_dimx", tiling.reduction_shape, kn.shape_of(a), dim, self.reduction_dimx)
        return self._add(tb.ReductionToDimxOp(a, dim, self.reduction_dimx))[0]

    def reduction_max(self, A: STensor, dim: int) -> tuple[STensor, STensor]:
        """Running max over `dim` across calls: returns (max, diff = old max - new max)."""
        (a,) = self._own("reduction_max", A)
        dim = _int("reduction_max", "dim", dim)
        _checked("reduction_max", tiling.reduction_shape, kn.shape_of(a), dim, 1)
        m, d = self._add(tb.ReductionMaxOp(a, dim))
        return m, d

    def rms_norm(self, A: STensor) -> STensor:
        """`x / sqrt(mean(x^2, last dim))`, no epsilon."""
        return self._unary("rms_norm", tb.RmsNormOp, A)

    def concat(self, A: STensor, B: STensor, dim: int) -> STensor:
        a, b = self._own("concat", A, B)
        self._same_phase("concat", a, b)
        dim = _int("concat", "dim", dim)
        _checked("concat", tiling.concat_shape, kn.shape_of(a), kn.shape_of(b), dim)
        return self._add(tb.ConcatOp(a, b, dim))[0]

    # ---- accumulators
    def _accum(self, name: str, kind: str, A: STensor, rescale: STensor | None = None) -> STensor:
        (a,) = self._own(name, A)
        if tb.after_accum(a):
            raise GraphBuildError(f"{name}: the accumulated tile is already after the for-loop (after_accum)")
        r = None
        if rescale is not None:
            (r,) = self._own(name, rescale)
            if tb.after_accum(r):
                raise GraphBuildError(f"{name}: the rescale tile must be computed inside the for-loop")
            shape = _checked(name, tiling.broadcast_shape, kn.shape_of(a), kn.shape_of(r))
            if shape != kn.shape_of(a):
                raise GraphBuildError(
                    f"{name}: rescale {kn.shape_of(r)} must broadcast to the input's shape {kn.shape_of(a)}"
                )
        _checked(name, tiling.accumulator_shape, kind, kn.shape_of(a), self.reduction_dimx)
        return self._add(tb.ForloopAccumOp(a, kind, self.reduction_dimx, rescale=r))[0]

    def forloop_accum(self, A: STensor, acc: str | None = None) -> STensor:
        """Accumulate over the for-loop: acc None (sum), "sum", "mean", "rms", "sum_todimx", "max"."""
        if not (acc is None or isinstance(acc, str)) or acc not in _ACC_KINDS:
            raise GraphBuildError(f"forloop_accum: unknown acc {_show(acc)} (expected one of {list(_ACC_KINDS)})")
        return self._accum("forloop_accum", _ACC_KINDS[acc], A)

    def forloop_accum_rescale(self, A: STensor, rescale: STensor, acc: str | None = None) -> STensor:
        """`acc = acc * rescale + A` over the loop; acc "sum" also sums the last dim."""
        if not (acc is None or isinstance(acc, str)) or acc not in _RESCALE_KINDS:
            raise GraphBuildError(
                f"forloop_accum_rescale: unknown acc {_show(acc)} (expected one of {list(_RESCALE_KINDS)})"
            )
        return self._accum("forloop_accum_rescale", _RESCALE_KINDS[acc], A, rescale)

    def forloop_accum_max(self, A: STensor) -> STensor:
        """Elementwise running max over the loop."""
        return self._accum("forloop_accum_max", "max", A)


def new_kernel_graph(name: str = "graph") -> KNGraph:
    """An empty kernel graph whose module function is called `name`."""
    return KNGraph(name)


def new_threadblock_graph(
    grid_dim: Sequence[int],
    block_dim: Sequence[int] = (128, 1, 1),
    forloop_range: int = 1,
    reduction_dimx: int = 64,
) -> TBGraph:
    """An empty threadblock graph for `KNGraph.customized`."""
    return TBGraph(grid_dim, block_dim, forloop_range, reduction_dimx)
