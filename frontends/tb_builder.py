"""The threadblock-graph builder (`TBGraph`, `new_threadblock_graph`): the block graph of a
`KNGraph.customized` kernel, with its grid, block, for-loop range, inputs and outputs
(imaps, omaps, forloop dims) and tb ops, every shape rule of `dialects/tiling.py` checked
as an op is added (see `builder.py`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from xdsl.ir import Block, Operation, Region, SSAValue

from mirage_xdsl.dialects import kn, tb, tiling
from mirage_xdsl.frontends.builder_common import DTensor, GraphBuildError, STensor, checked, int_arg, ints_arg, number_arg, show_value
from mirage_xdsl.target.device import MAX_FORLOOP_RANGE, MAX_TENSOR_ELEMENTS

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
        self.grid_dim = ints_arg(name, "grid_dim", grid_dim, 3)
        self.block_dim = ints_arg(name, "block_dim", block_dim, 3)
        if any(g < 1 for g in self.grid_dim) or any(b < 1 for b in self.block_dim):
            raise GraphBuildError(f"{name}: grid_dim and block_dim must be positive, got {self.grid_dim}, {self.block_dim}")
        threads = self.block_dim[0] * self.block_dim[1] * self.block_dim[2]
        if threads > tiling.MAX_THREADS_PER_BLOCK:
            raise GraphBuildError(f"{name}: block_dim {self.block_dim} has {threads} threads (max {tiling.MAX_THREADS_PER_BLOCK})")
        if (err := tiling.launch_geometry_error(self.grid_dim, self.block_dim)) is not None:
            raise GraphBuildError(f"{name}: {err}")  # the per-axis limits
        self.forloop_range = int_arg(name, "forloop_range", forloop_range, 1, MAX_FORLOOP_RANGE)
        self.reduction_dimx = int_arg(name, "reduction_dimx", reduction_dimx, 1, MAX_TENSOR_ELEMENTS)
        self._region = Region(Block())
        self._block = self._region.block
        self._inputs: list[DTensor] = []

    # ---- helpers
    def _own(self, name: str, *tensors: Any) -> list[SSAValue]:
        values = []
        for t in tensors:
            if not isinstance(t, STensor) or t.graph is not self:
                raise GraphBuildError(f"{name}: expected an STensor of this threadblock graph, got {show_value(t)}")
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
        imap = ints_arg("new_input", "input_map", input_map, 3)
        forloop_dim = int_arg("new_input", "forloop_dim", forloop_dim)
        tile = checked(
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
        if int_arg("new_output", "forloop_dim", forloop_dim) != -1:
            raise GraphBuildError("new_output: forloop_dim must be -1 (outputs are stored after the for-loop)")
        if not tb.after_accum(s):
            raise GraphBuildError(
                "new_output: the stored tile must be after_accum (pass it through a forloop accumulator)"
            )
        omap = ints_arg("new_output", "output_map", output_map, 3)
        checked("new_output", tiling.output_dtensor_shape, kn.shape_of(s), self.grid_dim, omap)
        self._block.add_op(tb.OutputOp(s, omap))

    # ---- elementwise
    def _unary(self, name: str, cls: type, A: STensor, *args: Any) -> STensor:
        (a,) = self._own(name, A)
        return self._add(cls(a, *args))[0]

    def exp(self, A: STensor) -> STensor:
        """e^x elementwise (`tb.exp`); same shape and dtype as `A`.

        Raises:
            GraphBuildError: `A` is not a tile of this graph.
        """
        return self._unary("exp", tb.ExpOp, A)

    def square(self, A: STensor) -> STensor:
        """x^2 elementwise (`tb.square`); same shape and dtype as `A`.

        Raises:
            GraphBuildError: `A` is not a tile of this graph.
        """
        return self._unary("square", tb.SquareOp, A)

    def sqrt(self, A: STensor) -> STensor:
        """the square root elementwise (`tb.sqrt`); same shape and dtype as `A`.

        Raises:
            GraphBuildError: `A` is not a tile of this graph.
        """
        return self._unary("sqrt", tb.SqrtOp, A)

    def silu(self, A: STensor) -> STensor:
        """x * sigmoid(x) (SiLU, Elfwing et al. 2018) elementwise (`tb.silu`); same shape and dtype as `A`.

        Raises:
            GraphBuildError: `A` is not a tile of this graph.
        """
        return self._unary("silu", tb.SiluOp, A)

    def sigmoid(self, A: STensor) -> STensor:
        """1 / (1 + e^-x) elementwise (`tb.sigmoid`); same shape and dtype as `A`.

        Raises:
            GraphBuildError: `A` is not a tile of this graph.
        """
        return self._unary("sigmoid", tb.SigmoidOp, A)

    def gelu(self, A: STensor) -> STensor:
        """0.5 x (1 + erf(x / sqrt(2))) (exact GELU, Hendrycks & Gimpel 2016) elementwise (`tb.gelu`); same shape and dtype as `A`.

        Raises:
            GraphBuildError: `A` is not a tile of this graph.
        """
        return self._unary("gelu", tb.GeluOp, A)

    def relu(self, A: STensor) -> STensor:
        """max(x, 0) elementwise (`tb.relu`); same shape and dtype as `A`.

        Raises:
            GraphBuildError: `A` is not a tile of this graph.
        """
        return self._unary("relu", tb.ReluOp, A)

    def log(self, A: STensor) -> STensor:
        """the natural logarithm elementwise (`tb.log`); same shape and dtype as `A`.

        Raises:
            GraphBuildError: `A` is not a tile of this graph.
        """
        return self._unary("log", tb.LogOp, A)

    def clamp(self, A: STensor, min_value: float, max_value: float) -> STensor:
        """min(max(A, min_value), max_value) elementwise (`tb.clamp`); same tile type as `A`.

        Raises:
            GraphBuildError: `A` is not a tile of this graph, a bound is not a number (or NaN), or min_value > max_value.
        """
        lo, hi = number_arg("clamp", "min_value", min_value), number_arg("clamp", "max_value", max_value)
        if lo > hi:
            raise GraphBuildError(f"clamp: min {lo} exceeds max {hi}")
        return self._unary("clamp", tb.ClampOp, A, lo, hi)

    def mul_scalar(self, A: STensor, scalar: float) -> STensor:
        """A * scalar elementwise (`tb.mul_scalar`); same tile type as `A`.

        Raises:
            GraphBuildError: `A` is not a tile of this graph, or `scalar` is not a number (or NaN).
        """
        return self._unary("mul_scalar", tb.MulScalarOp, A, number_arg("mul_scalar", "scalar", scalar))

    def add_scalar(self, A: STensor, scalar: float) -> STensor:
        """A + scalar elementwise (`tb.add_scalar`); same tile type as `A`.

        Raises:
            GraphBuildError: `A` is not a tile of this graph, or `scalar` is not a number (or NaN).
        """
        return self._unary("add_scalar", tb.AddScalarOp, A, number_arg("add_scalar", "scalar", scalar))

    def _binary(self, name: str, cls: type[tb.TbBinaryOp] | type[tb.MatmulOp], A: STensor, B: STensor) -> STensor:
        a, b = self._own(name, A, B)
        self._same_phase(name, a, b)
        checked(name, cls.infer_shape, kn.shape_of(a), kn.shape_of(b))
        return self._add(cls(a, b))[0]

    def add(self, A: STensor, B: STensor) -> STensor:
        """A + B elementwise with numpy broadcasting over equal ranks (`tb.add`); dtype of the operands.

        Raises:
            GraphBuildError: an operand is not a tile of this graph, the operands differ in after_accum,
                the dtypes differ, or the shapes do not broadcast.
        """
        return self._binary("add", tb.AddOp, A, B)

    def sub(self, A: STensor, B: STensor) -> STensor:
        """A - B elementwise with numpy broadcasting over equal ranks (`tb.sub`); dtype of the operands.

        Raises:
            GraphBuildError: an operand is not a tile of this graph, the operands differ in after_accum,
                the dtypes differ, or the shapes do not broadcast.
        """
        return self._binary("sub", tb.SubOp, A, B)

    def mul(self, A: STensor, B: STensor) -> STensor:
        """A * B elementwise with numpy broadcasting over equal ranks (`tb.mul`); dtype of the operands.

        Raises:
            GraphBuildError: an operand is not a tile of this graph, the operands differ in after_accum,
                the dtypes differ, or the shapes do not broadcast.
        """
        return self._binary("mul", tb.MulOp, A, B)

    def div(self, A: STensor, B: STensor) -> STensor:
        """A / B elementwise with numpy broadcasting over equal ranks (`tb.div`); dtype of the operands.

        Raises:
            GraphBuildError: an operand is not a tile of this graph, the operands differ in after_accum,
                the dtypes differ, or the shapes do not broadcast.
        """
        return self._binary("div", tb.DivOp, A, B)

    def pow(self, A: STensor, B: STensor) -> STensor:
        """A ** B elementwise with numpy broadcasting over equal ranks (`tb.pow`); dtype of the operands.

        Raises:
            GraphBuildError: an operand is not a tile of this graph, the operands differ in after_accum,
                the dtypes differ, or the shapes do not broadcast.
        """
        return self._binary("pow", tb.PowOp, A, B)

    def matmul(self, A: STensor, B: STensor) -> STensor:
        """Tile matmul [1.., M, K] @ [1.., K, N] -> [1.., M, N] (`tb.matmul`, every leading dim 1).

        Raises:
            GraphBuildError: an operand is not a tile of this graph, they differ in after_accum or dtype,
                ranks differ or are < 2, K differs, or a leading dim is not 1.
        """
        return self._binary("matmul", tb.MatmulOp, A, B)

    # ---- reductions, norms, concat
    def reduction(self, A: STensor, dim: int) -> STensor:
        """Sum `dim` down to 1."""
        (a,) = self._own("reduction", A)
        dim = int_arg("reduction", "dim", dim)
        checked("reduction", tiling.reduction_shape, kn.shape_of(a), dim, 1)
        return self._add(tb.ReductionOp(a, dim))[0]

    def reduce_max(self, A: STensor, dim: int) -> STensor:
        """Max over `dim` of this tile down to 1, no state across calls (`tb.reduce_max`).

        Raises:
            GraphBuildError: `A` is not a tile of this graph, or `dim` is not one of its dims.
        """
        (a,) = self._own("reduce_max", A)
        dim = int_arg("reduce_max", "dim", dim)
        checked("reduce_max", tiling.reduction_shape, kn.shape_of(a), dim, 1)
        return self._add(tb.ReduceMaxOp(a, dim))[0]

    def reduction_to_dimx(self, A: STensor, dim: int) -> STensor:
        """Sum strided groups of `dim` down to the graph's `reduction_dimx`."""
        (a,) = self._own("reduction_to_dimx", A)
        dim = int_arg("reduction_to_dimx", "dim", dim)
        checked("reduction_to_dimx", tiling.reduction_shape, kn.shape_of(a), dim, self.reduction_dimx)
        return self._add(tb.ReductionToDimxOp(a, dim, self.reduction_dimx))[0]

    def reduction_max(self, A: STensor, dim: int) -> tuple[STensor, STensor]:
        """Running max over `dim` across calls: returns (max, diff = old max - new max)."""
        (a,) = self._own("reduction_max", A)
        dim = int_arg("reduction_max", "dim", dim)
        checked("reduction_max", tiling.reduction_shape, kn.shape_of(a), dim, 1)
        m, d = self._add(tb.ReductionMaxOp(a, dim))
        return m, d

    def rms_norm(self, A: STensor) -> STensor:
        """`x / sqrt(mean(x^2, last dim))`, no epsilon."""
        return self._unary("rms_norm", tb.RmsNormOp, A)

    def concat(self, A: STensor, B: STensor, dim: int) -> STensor:
        """Concatenate tiles A and B along `dim` (`tb.concat`); other dims must be equal.

        Raises:
            GraphBuildError: an operand is not a tile of this graph, they differ in after_accum or dtype,
                `dim` is not an int or not a dim, or the other dims differ (`tiling.concat_shape`).
        """
        a, b = self._own("concat", A, B)
        self._same_phase("concat", a, b)
        dim = int_arg("concat", "dim", dim)
        checked("concat", tiling.concat_shape, kn.shape_of(a), kn.shape_of(b), dim)
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
            shape = checked(name, tiling.broadcast_shape, kn.shape_of(a), kn.shape_of(r))
            if shape != kn.shape_of(a):
                raise GraphBuildError(
                    f"{name}: rescale {kn.shape_of(r)} must broadcast to the input's shape {kn.shape_of(a)}"
                )
        checked(name, tiling.accumulator_shape, kind, kn.shape_of(a), self.reduction_dimx)
        return self._add(tb.ForloopAccumOp(a, kind, self.reduction_dimx, rescale=r))[0]

    def forloop_accum(self, A: STensor, acc: str | None = None) -> STensor:
        """Accumulate over the for-loop: acc None (sum), "sum", "mean", "rms", "sum_todimx", "max"."""
        if not (acc is None or isinstance(acc, str)) or acc not in _ACC_KINDS:
            raise GraphBuildError(f"forloop_accum: unknown acc {show_value(acc)} (expected one of {list(_ACC_KINDS)})")
        return self._accum("forloop_accum", _ACC_KINDS[acc], A)

    def forloop_accum_rescale(self, A: STensor, rescale: STensor, acc: str | None = None) -> STensor:
        """`acc = acc * rescale + A` over the loop; acc "sum" also sums the last dim."""
        if not (acc is None or isinstance(acc, str)) or acc not in _RESCALE_KINDS:
            raise GraphBuildError(
                f"forloop_accum_rescale: unknown acc {show_value(acc)} (expected one of {list(_RESCALE_KINDS)})"
            )
        return self._accum("forloop_accum_rescale", _RESCALE_KINDS[acc], A, rescale)

    def forloop_accum_max(self, A: STensor) -> STensor:
        """Elementwise running max over the loop."""
        return self._accum("forloop_accum_max", "max", A)


def new_threadblock_graph(
    grid_dim: Sequence[int],
    block_dim: Sequence[int] = (128, 1, 1),
    forloop_range: int = 1,
    reduction_dimx: int = 64,
) -> TBGraph:
    """An empty threadblock graph for `KNGraph.customized`."""
    return TBGraph(grid_dim, block_dim, forloop_range, reduction_dimx)
