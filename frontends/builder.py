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

`KNGraph` lives here, `TBGraph` in `tb_builder.py`, the argument checks, dtypes and the
tensor handles both return in `builder_common.py`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, ModuleOp, TensorType, UnitAttr
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.utils.exceptions import VerifyException

from mirage_xdsl.dialects import kn, tb, tiling
from mirage_xdsl.dialects.kn.graph_verify import strides_error, verify_kernel_graphs
from mirage_xdsl.frontends.builder_common import (
    DTensor,
    GraphBuildError,
    checked,
    dims_arg,
    dtype_attr,
    int_arg,
    ints_arg,
    number_arg,
    show_value,
)
from mirage_xdsl.frontends.tb_builder import TBGraph

__all__ = ["KNGraph", "new_kernel_graph"]


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
        shape = dims_arg("new_input", dims)
        st = tiling.row_major_strides(shape) if strides is None else ints_arg("new_input", "strides", strides)
        if len(st) != len(shape) or any(s < 0 for s in st):
            raise GraphBuildError(f"new_input: strides {st} must be {len(shape)} non-negative ints for dims {shape}")
        if (err := strides_error(st, shape, output=False)) is not None:
            raise GraphBuildError(f"new_input: strides {list(st)} {err}")
        if name is not None and not isinstance(name, str):
            raise GraphBuildError(f"new_input: name must be a string or None, got {show_value(name)}")
        if not isinstance(weight, bool):
            raise GraphBuildError(f"new_input: weight must be True or False, got {show_value(weight)}")
        arg = self._block.insert_arg(TensorType(dtype_attr(dtype), shape), len(self._block.args))
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
            st = ints_arg("mark_output", "strides", strides)
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
        """e^x elementwise (`kn.exp`); same shape and dtype as `A`.

        Raises:
            GraphBuildError: `A` is not a DTensor of this graph.
        """
        return self._unary("exp", kn.ExpOp, A)

    def square(self, A: DTensor) -> DTensor:
        """x^2 elementwise (`kn.square`); same shape and dtype as `A`.

        Raises:
            GraphBuildError: `A` is not a DTensor of this graph.
        """
        return self._unary("square", kn.SquareOp, A)

    def sqrt(self, A: DTensor) -> DTensor:
        """the square root elementwise (`kn.sqrt`); same shape and dtype as `A`.

        Raises:
            GraphBuildError: `A` is not a DTensor of this graph.
        """
        return self._unary("sqrt", kn.SqrtOp, A)

    def silu(self, A: DTensor) -> DTensor:
        """x * sigmoid(x) (SiLU, Elfwing et al. 2018) elementwise (`kn.silu`); same shape and dtype as `A`.

        Raises:
            GraphBuildError: `A` is not a DTensor of this graph.
        """
        return self._unary("silu", kn.SiluOp, A)

    def sigmoid(self, A: DTensor) -> DTensor:
        """1 / (1 + e^-x) elementwise (`kn.sigmoid`); same shape and dtype as `A`.

        Raises:
            GraphBuildError: `A` is not a DTensor of this graph.
        """
        return self._unary("sigmoid", kn.SigmoidOp, A)

    def gelu(self, A: DTensor) -> DTensor:
        """0.5 x (1 + erf(x / sqrt(2))) (exact GELU, Hendrycks & Gimpel 2016) elementwise (`kn.gelu`); same shape and dtype as `A`.

        Raises:
            GraphBuildError: `A` is not a DTensor of this graph.
        """
        return self._unary("gelu", kn.GeluOp, A)

    def relu(self, A: DTensor) -> DTensor:
        """max(x, 0) elementwise (`kn.relu`); same shape and dtype as `A`.

        Raises:
            GraphBuildError: `A` is not a DTensor of this graph.
        """
        return self._unary("relu", kn.ReluOp, A)

    def log(self, A: DTensor) -> DTensor:
        """the natural logarithm elementwise (`kn.log`); same shape and dtype as `A`.

        Raises:
            GraphBuildError: `A` is not a DTensor of this graph.
        """
        return self._unary("log", kn.LogOp, A)

    def clamp(self, A: DTensor, min_value: float, max_value: float) -> DTensor:
        """min(max(A, min_value), max_value) elementwise (`kn.clamp`); same shape and dtype as `A`.

        Raises:
            GraphBuildError: `A` is not a DTensor of this graph, a bound is not a number (or NaN), or min_value > max_value.
        """
        lo, hi = number_arg("clamp", "min_value", min_value), number_arg("clamp", "max_value", max_value)
        if lo > hi:
            raise GraphBuildError(f"clamp: min {lo} exceeds max {hi}")
        return self._unary("clamp", kn.ClampOp, A, lo, hi)

    def mul_scalar(self, A: DTensor, scalar: float) -> DTensor:
        """A * scalar elementwise (`kn.mul_scalar`); same shape and dtype as `A`.

        Raises:
            GraphBuildError: `A` is not a DTensor of this graph, or `scalar` is not a number (or NaN).
        """
        return self._unary("mul_scalar", kn.MulScalarOp, A, number_arg("mul_scalar", "scalar", scalar))

    def add_scalar(self, A: DTensor, scalar: float) -> DTensor:
        """A + scalar elementwise (`kn.add_scalar`, e.g. a normalisation's epsilon); same shape and
        dtype as `A`.

        Raises:
            GraphBuildError: `A` is not a DTensor of this graph, or `scalar` is not a number (or NaN).
        """
        return self._unary("add_scalar", kn.AddScalarOp, A, number_arg("add_scalar", "scalar", scalar))

    def causal_mask(self, A: DTensor, offset: int | None = None) -> DTensor:
        """A where `col <= row + offset` over its last two dims [..., q, k], -inf elsewhere
        (`kn.causal_mask`, applied to attention scores before the softmax); same shape and
        dtype.  `offset` defaults to `k - q` (FlashAttention's bottom-right alignment; the
        lower triangle when q == k).

        Raises:
            GraphBuildError: `A` is not a DTensor of this graph, has rank < 2, or `offset` is not
                an int >= 0 (row 0 would have no key; needs q <= k by default).
        """
        (a,) = self._own("causal_mask", A)
        shape = kn.shape_of(a)
        if len(shape) < 2:
            raise GraphBuildError(f"causal_mask: needs a tensor of rank >= 2 ([..., q, k]), got shape {shape}")
        off = shape[-1] - shape[-2] if offset is None else int_arg("causal_mask", "offset", offset)
        if off < 0:
            raise GraphBuildError(
                f"causal_mask: offset {off} < 0 leaves row 0 without a key (q = {shape[-2]} > k = {shape[-1]}?); "
                "pass offset >= 0"
            )
        return self._add(kn.CausalMaskOp(a, off))[0]

    def _binary(self, name: str, cls: type, A: DTensor, B: DTensor) -> DTensor:
        a, b = self._own(name, A, B)
        self._same_dtype(name, a, b)
        checked(name, tiling.broadcast_shape, kn.shape_of(a), kn.shape_of(b))
        return self._add(cls(a, b))[0]

    def add(self, A: DTensor, B: DTensor) -> DTensor:
        """A + B elementwise with numpy broadcasting over equal ranks (`kn.add`); dtype of the operands.

        Raises:
            GraphBuildError: an operand is not a DTensor of this graph, the dtypes differ, or the shapes do not broadcast.
        """
        return self._binary("add", kn.AddOp, A, B)

    def sub(self, A: DTensor, B: DTensor) -> DTensor:
        """A - B elementwise with numpy broadcasting over equal ranks (`kn.sub`); dtype of the operands.

        Raises:
            GraphBuildError: an operand is not a DTensor of this graph, the dtypes differ, or the shapes do not broadcast.
        """
        return self._binary("sub", kn.SubOp, A, B)

    def mul(self, A: DTensor, B: DTensor) -> DTensor:
        """A * B elementwise with numpy broadcasting over equal ranks (`kn.mul`); dtype of the operands.

        Raises:
            GraphBuildError: an operand is not a DTensor of this graph, the dtypes differ, or the shapes do not broadcast.
        """
        return self._binary("mul", kn.MulOp, A, B)

    def div(self, A: DTensor, B: DTensor) -> DTensor:
        """A / B elementwise with numpy broadcasting over equal ranks (`kn.div`); dtype of the operands.

        Raises:
            GraphBuildError: an operand is not a DTensor of this graph, the dtypes differ, or the shapes do not broadcast.
        """
        return self._binary("div", kn.DivOp, A, B)

    def pow(self, A: DTensor, B: DTensor) -> DTensor:
        """A ** B elementwise with numpy broadcasting over equal ranks (`kn.pow`); dtype of the operands.

        Raises:
            GraphBuildError: an operand is not a DTensor of this graph, the dtypes differ, or the shapes do not broadcast.
        """
        return self._binary("pow", kn.PowOp, A, B)

    # ---- structured
    def matmul(self, A: DTensor, B: DTensor) -> DTensor:
        """Batched matmul over the last two dims: [B..., M, K] @ [B..., K, N] -> [B..., M, N] (`kn.matmul`).

        Raises:
            GraphBuildError: an operand is not a DTensor of this graph, the dtypes differ, ranks differ
                or are < 2, K differs, or the batch dims differ.
        """
        a, b = self._own("matmul", A, B)
        self._same_dtype("matmul", a, b)
        checked("matmul", tiling.matmul_shape, kn.shape_of(a), kn.shape_of(b), threadblock=False)
        return self._add(kn.MatmulOp(a, b))[0]

    def reduction(self, A: DTensor, dim: int, size: int = 1) -> DTensor:
        """Sum `dim` down to `size` (strided groups when size > 1)."""
        (a,) = self._own("reduction", A)
        dim, size = int_arg("reduction", "dim", dim), int_arg("reduction", "size", size)
        checked("reduction", tiling.reduction_shape, kn.shape_of(a), dim, size)
        return self._add(kn.ReductionOp(a, dim, size))[0]

    def reduction_max(self, A: DTensor, dim: int) -> DTensor:
        """Max over `dim` down to 1 (`kn.reduction_max`: the row max of a stable softmax).

        Raises:
            GraphBuildError: `A` is not a tensor of this graph, or `dim` is not one of its dims.
        """
        (a,) = self._own("reduction_max", A)
        dim = int_arg("reduction_max", "dim", dim)
        checked("reduction_max", tiling.reduction_shape, kn.shape_of(a), dim, 1)
        return self._add(kn.ReductionMaxOp(a, dim))[0]

    def rms_norm(self, A: DTensor, normalized_shape: Sequence[int]) -> DTensor:
        """x / sqrt(mean(x^2)) over the trailing `normalized_shape` dims, no epsilon, no gain (`kn.rms_norm`).

        Raises:
            GraphBuildError: `A` is not a DTensor of this graph, or `normalized_shape` is not ints equal
                to A's trailing dims.
        """
        (a,) = self._own("rms_norm", A)
        norm = ints_arg("rms_norm", "normalized_shape", normalized_shape)
        shape = kn.shape_of(a)
        if not norm or len(norm) > len(shape) or shape[len(shape) - len(norm) :] != norm:
            raise GraphBuildError(f"rms_norm: normalized_shape {norm} must equal the trailing dims of {shape}")
        return self._add(kn.RmsNormOp(a, norm))[0]

    def concat(self, A: DTensor, B: DTensor, dim: int) -> DTensor:
        """Concatenate A and B along `dim` (`kn.concat`); other dims must be equal.

        Raises:
            GraphBuildError: an operand is not a DTensor of this graph, the dtypes differ, `dim` is not an
                int or not a dim, or the other dims differ (`tiling.concat_shape`).
        """
        a, b = self._own("concat", A, B)
        self._same_dtype("concat", a, b)
        dim = int_arg("concat", "dim", dim)
        checked("concat", tiling.concat_shape, kn.shape_of(a), kn.shape_of(b), dim)
        return self._add(kn.ConcatOp(a, b, dim))[0]

    def chunk(self, A: DTensor, chunks: int, dim: int) -> list[DTensor]:
        """Split `dim` into `chunks` equal parts."""
        (a,) = self._own("chunk", A)
        shape = kn.shape_of(a)
        dim, chunks = int_arg("chunk", "dim", dim), int_arg("chunk", "chunks", chunks)
        if not 0 <= dim < len(shape):
            raise GraphBuildError(f"chunk: dim {dim} is not a dimension of a rank-{len(shape)} tensor")
        if chunks < 1 or shape[dim] % chunks:
            raise GraphBuildError(f"chunk: dim {dim} (size {shape[dim]}) is not divisible into {chunks} chunks")
        return self._add(kn.ChunkOp(a, chunks, dim))

    def reshape(self, A: DTensor, shape: Sequence[int]) -> DTensor:
        """A's elements in row-major order with another shape (`kn.reshape`, numpy semantics;
        a view of A's buffer where its strides allow, else a copy).  E.g. a [1, 4096] query
        projection as [8, 4, 128]: 8 KV heads x 4 query heads x head dim 128.

        Raises:
            GraphBuildError: `A` is not a DTensor of this graph, `shape` is not positive ints, or
                its element count differs from A's.
        """
        (a,) = self._own("reshape", A)
        new = ints_arg("reshape", "shape", shape)
        old = kn.shape_of(a)
        if not new or any(n < 1 for n in new):
            raise GraphBuildError(f"reshape: shape {list(new)} must be positive sizes")
        if math.prod(new) != math.prod(old):
            raise GraphBuildError(
                f"reshape: cannot reshape {list(old)} ({math.prod(old)} elements) into {list(new)} ({math.prod(new)} elements)"
            )
        return self._add(kn.ReshapeOp(a, new))[0]

    def all_reduce(self, A: DTensor, inplace: bool = False) -> DTensor:
        """Sum of A over the GPUs (`kn.all_reduce`); on one GPU the identity.

        Raises:
            GraphBuildError: `A` is not a DTensor of this graph, or `inplace` is not a bool.
        """
        if not isinstance(inplace, bool):
            raise GraphBuildError(f"all_reduce: inplace must be True or False, got {show_value(inplace)}")
        return self._unary("all_reduce", kn.AllReduceOp, A, inplace)

    def customized(self, inputs: Sequence[DTensor], bgraph: TBGraph) -> list[DTensor]:
        """A graph-defined kernel; returns one DTensor per `new_output` of `bgraph`, in order."""
        if isinstance(inputs, str | bytes) or not isinstance(inputs, Sequence):
            raise GraphBuildError(f"customized: inputs must be a list of DTensors, got {show_value(inputs)}")
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
            shape = checked(f"customized (output {i})", tiling.output_dtensor_shape,
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


def new_kernel_graph(name: str = "graph") -> KNGraph:
    """An empty kernel graph whose module function is called `name`."""
    return KNGraph(name)
