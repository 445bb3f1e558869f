"""`cute` compute ops on shared-memory tiles: `cute.fill`, `cute.elementwise` (a fusion
chain), `cute.grid_sum` (split-K partials combined in the kernel), `cute.reduce` and
`cute.concat`, with the attributes the cute passes write on them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from xdsl.dialects.builtin import ArrayAttr, DenseArrayBase, FloatAttr, IntegerAttr, StringAttr, f64, i64
from xdsl.ir import Attribute, SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
    ParsePropInAttrDict,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    var_operand_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer

from mirage_xdsl.dialects.cute.attrs import LEADER_FNS, SmemTensorType, UnaryFnAttr, dense, dense_ints, format_float, rule_error
from mirage_xdsl.dialects.cute.kernel import CuteOp, ForOp, KernelOp, check_epilogue, check_mode, check_order, kernel_of, smem_type
from mirage_xdsl.dialects.cute.memory_ops import CopyG2SOp

ACCUM_IN_REG = "cute.accum_in_reg"
"""Unit attribute on a `cute.fill` of 0: the tile is a for-loop accumulator that the
shared-memory plan (tb-schedule's `tb.accum_in_reg`) keeps in registers through the loop;
its shared tile only holds the value stored once after the loop, so the printer must keep it
in registers (it may overlap the loop's buffers)."""


REG_ACCUM = "cute.reg_accum"
"""`i64` on a `cute.fill` of 0 (written by cute-register-accumulators): the tile it clears is a
for-loop accumulator kept in registers, this many per thread, through the loop and stored to
its shared tile once after it (the printer declares a RegTile here)."""


REG_ACCUMS = "cute.reg_accums"
"""`i64` on a `cute.kernel` (written by cute-register-accumulators): how many of its fills
carry `REG_ACCUM` (0 = none; its presence says the decision was made)."""


@irdl_op_definition
class FillOp(CuteOp):
    """Set every element of a tile to `value` (`0.0` clears an accumulator, `-inf` starts a
    running max): `cute.fill %s, -inf : !cute.smem<...>`; `{cute.accum_in_reg}`: see
    `ACCUM_IN_REG`; `{cute.reg_accum = N}`: see `REG_ACCUM`."""

    name = "cute.fill"
    dst = operand_def(SmemTensorType)
    value = prop_def(FloatAttr)

    def __init__(self, dst: SSAValue, value: float):
        super().__init__(operands=[dst], properties={"value": FloatAttr(value, f64)})

    @property
    def fill_value(self) -> float:
        """The fill value as a Python float (may be +-inf)."""
        return float(self.value.value.data)

    def print(self, printer: Printer) -> None:
        """Print `%dst, <value> {attrs} : <tile type>` (infinities as `inf` / `-inf`)."""
        v = self.fill_value
        text = ("-inf" if v < 0 else "inf") if math.isinf(v) else format_float(v)
        printer.print_string(" ")
        printer.print_operand(self.dst)
        printer.print_string(f", {text}")
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.dst.type)

    @classmethod
    def parse(cls, parser: Parser) -> FillOp:
        """Parse `%dst, [-]<number | inf> {attrs} : <tile type>`.

        Raises:
            ParseError: malformed text.
        """
        dst = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        neg = parser.parse_optional_punctuation("-") is not None
        if parser.parse_optional_keyword("inf"):
            value = math.inf
        else:
            value = float(parser.parse_number())
        value = -value if neg else value
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        typ = parser.parse_type()
        op = cls.create(
            operands=[parser.resolve_operand(dst, typ)],
            properties={"value": FloatAttr(value, f64)},
            attributes=attrs,
        )
        return op


@irdl_op_definition
class ElementwiseOp(CuteOp):
    """A fusion chain over tiles: `v = epilogue(fn(ins...))`, then `out (=|+=|max=) v`.

    Inputs broadcast (a size-1 dim is repeated); `order` lists the dims from fastest to
    slowest (consecutive threads walk `order[0]`, the chain's iteration dim); with mode
    `rescale` the last input is the scale `s` of `out = out * s + v`.
    """

    name = "cute.elementwise"
    ins = var_operand_def(SmemTensorType)
    out = operand_def(SmemTensorType)
    fn = prop_def(StringAttr)
    epilogue = prop_def(ArrayAttr)
    mode = prop_def(StringAttr)
    order = prop_def(DenseArrayBase)
    assembly_format = "$fn `(` $ins `)` $epilogue $mode $out attr-dict `:` type($ins) `->` type($out)"

    def __init__(
        self,
        fn: str,
        ins: Sequence[SSAValue],
        out: SSAValue,
        epilogue: Sequence[UnaryFnAttr],
        mode: str,
        order: Sequence[int],
    ):
        super().__init__(
            operands=[list(ins), out],
            properties={
                "fn": StringAttr(fn),
                "epilogue": ArrayAttr(epilogue),
                "mode": StringAttr(mode),
                "order": dense(order),
            },
        )

    def verify_(self) -> None:
        """Check the leader, the mode, the arity and the shapes.

        Raises:
            CuteVerifyError: `fn` is not in `LEADER_FNS`, the mode is not a store mode, the number of
                inputs is not the leader's arity (+1 scale tile for `rescale`), the epilogue holds a
                non-`#cute.fn`, an input does not broadcast to the output's shape, or `order` is not a
                permutation of the output's dims.
        """
        fn = self.fn.data
        if fn not in LEADER_FNS:
            raise rule_error(self, f"fn '{fn}' must be one of {', '.join(LEADER_FNS)}")
        check_mode(self, self.mode)
        arity = LEADER_FNS[fn] + (1 if self.mode.data == "rescale" else 0)
        if len(self.ins) != arity:
            raise rule_error(self, f"fn '{fn}' with mode '{self.mode.data}' takes {arity} inputs, got {len(self.ins)}")
        check_epilogue(self, self.epilogue)
        out_shape = smem_type(self.out).get_shape()
        for i, v in enumerate(self.ins):
            shape = smem_type(v).get_shape()
            if len(shape) != len(out_shape) or any(a != b and a != 1 for a, b in zip(shape, out_shape)):
                raise rule_error(self, f"input #{i} of shape {shape} does not broadcast to the output shape {out_shape}")
        check_order(self, self.order, len(out_shape))


@irdl_op_definition
class GridSumOp(CuteOp):
    """The split-K combine of `tb.grid_sum`, inside the kernel: each block writes its tiles
    `ins` (fp32) to its slot of the global scratch, `__threadfence`, and arrives at its split
    group's counter; the last block to arrive re-arms the counter, sums the group's slots in
    split order into `outs`, and goes on; the other blocks return.  `dim` is the grid axis
    the group spans (0 = x, 1 = y, 2 = z).  The scratch (`kn.grid_sum_scratch_offset` in the
    workspace) and the counters (a zeroed buffer the runtime keeps per compiled graph) are
    extra kernel parameters.  `cute.grid_sum(%a, %b) -> (%c, %d) {dim = 1 : i64} : ...`.

    With `partner_trips = E` (set by cute-late-finisher) the group is combined by its last
    block along `dim`, the finisher, without a flag: the others (partners) run E iterations of
    the kernel's for-loop each and the finisher the rest, `split * trip_count - (split - 1) * E`,
    so the partners end early; they publish their tiles into the counter buffer (one slot per
    partner and group, no workspace scratch) and return, and the finisher adds them to its
    own (codegen/include/mirage_xdsl/grid.cuh, "The late finisher")."""

    name = "cute.grid_sum"
    ins = var_operand_def(SmemTensorType)
    outs = var_operand_def(SmemTensorType)
    dim = prop_def(IntegerAttr)
    partner_trips = opt_prop_def(IntegerAttr)
    irdl_options = (AttrSizedOperandSegments(as_property=True), ParsePropInAttrDict())  # type: ignore[assignment]  # a wider tuple than CuteOp's
    assembly_format = "`(` $ins `)` `->` `(` $outs `)` attr-dict `:` type($ins) `->` type($outs)"

    def __init__(self, ins: Sequence[SSAValue], outs: Sequence[SSAValue], dim: int, partner_trips: int | None = None):
        props: dict[str, Attribute] = {"dim": IntegerAttr(dim, i64)}
        if partner_trips is not None:
            props["partner_trips"] = IntegerAttr(partner_trips, i64)
        super().__init__(operands=[list(ins), list(outs)], properties=props)

    @property
    def grid_axis(self) -> int:
        """The grid axis (0, 1 or 2) whose blocks are summed."""
        return self.dim.value.data

    @property
    def partner_trip_count(self) -> int | None:
        """Iterations of each partner under the late finisher (None: every block runs the loop)."""
        return None if self.partner_trips is None else self.partner_trips.value.data

    def verify_(self) -> None:
        """Check the tiles, the axis and (inside a kernel) the grid and the late-finisher split.

        Raises:
            CuteVerifyError: no tiles or not one output per input, an input/output shape mismatch,
                an axis outside 0..2, a grid axis of fewer than 2 blocks, or an invalid
                `partner_trips` (`verify_late_finisher`).
        """
        if len(self.ins) != len(self.outs) or not self.ins:
            raise rule_error(self, f"needs one output tile per input tile, got {len(self.ins)} and {len(self.outs)}")
        for i, (a, b) in enumerate(zip(self.ins, self.outs)):
            if smem_type(a).get_shape() != smem_type(b).get_shape():
                raise rule_error(self, f"tile #{i}: input shape {smem_type(a).get_shape()} differs from output {smem_type(b).get_shape()}")
        if not 0 <= self.grid_axis < 3:
            raise rule_error(self, f"dim must be a grid axis 0, 1 or 2, got {self.grid_axis}")
        kernel = kernel_of(self)
        if kernel is not None and kernel.grid[self.grid_axis] < 2:
            raise rule_error(self, f"grid axis {self.grid_axis} has {kernel.grid[self.grid_axis]} block: nothing to sum")
        if kernel is not None and self.partner_trip_count is not None:
            self.verify_late_finisher(kernel)

    def verify_late_finisher(self, kernel: KernelOp) -> None:
        """The split ranges must be real: 1 <= E < the loop's trip count, and every loop's
        tile offset along the split axis must be whole iterations (so a split's first
        iteration is the sum of the earlier splits' counts)."""
        loops = [op for op in kernel.body.block.ops if isinstance(op, ForOp)]
        if len(loops) != 1:
            raise rule_error(self, f"partner_trips needs exactly one top-level cute.for in the kernel, found {len(loops)}")
        trips, e = loops[0].trip_count, self.partner_trip_count
        assert e is not None
        if not 1 <= e < trips:
            raise rule_error(self, f"partner_trips = {e} must lie in [1, {trips}) (the for-loop's trip count)")
        copy = partial_iteration_offset(kernel, self.grid_axis, trips)
        if copy is not None:
            raise rule_error(
                copy,
                f"under the late finisher a tile's offset along grid axis {self.grid_axis} must be whole "
                f"iterations ({trips} x {copy.iter_stride.value.data}), got "
                f"{dense_ints(copy.block_offset)[self.grid_axis]}; drop partner_trips from cute.grid_sum",
            )


def partial_iteration_offset(kernel: KernelOp, axis: int, trips: int) -> CopyG2SOp | None:
    """The first load of `kernel` whose tile offset along grid axis `axis` is not `trips` whole
    iterations (`trips * iter_stride`), or None: the split ranges of a late finisher need
    contiguous K ranges, one block's `trips` iterations after the previous one's."""
    for copy in kernel.walk():
        if isinstance(copy, CopyG2SOp):
            off = dense_ints(copy.block_offset)[axis]
            if off and off != trips * copy.iter_stride.value.data:
                return copy
    return None


REDUCE_THREADS = "cute.reduce_threads"
"""`i64` attribute on every `cute.reduce` (written by cute-block-reduce, read by the CUDA
printer): the threads that cooperate on each output element as printed -- the op's own
`threads` (at most a warp) or, for a sum whose outputs would keep at most a quarter of the
block's warps busy, a power of two of at least 128 (the whole block: warps meet in a few
bytes of shared memory appended to the kernel's plan)."""


@irdl_op_definition
class ReduceOp(CuteOp):
    """Reduce dim `dim` of `input` to `group` elements over STRIDED groups:
    `v[..., j, ...] = sum_k in[..., j + k*group, ...]` (kind `sum`), then epilogue and store.
    Kind `sum_squares` sums `in^2`, each square taken in fp32 (cute-fuse-square-sum: an fp16
    tile of squares underflows below |x| ~ 2.4e-4).  Kind `max` (group 1) with one result is the plain max (`tb.reduce_max`), then epilogue
    and store; with two it is Mirage's running reduction_max: `outs = (max, diff)`,
    `new = max(max, max_k in)`, `diff = old - new`.  `threads` threads cooperate on each
    output element (a power of two <= 32, shuffle-reduced).  `{cute.reduce_threads = G}`:
    see `REDUCE_THREADS` (the threads per output the printer uses, G >= threads)."""

    name = "cute.reduce"
    input = operand_def(SmemTensorType)
    outs = var_operand_def(SmemTensorType)
    kind = prop_def(StringAttr)
    dim = prop_def(IntegerAttr)
    group = prop_def(IntegerAttr)
    threads = prop_def(IntegerAttr)
    epilogue = prop_def(ArrayAttr)
    mode = prop_def(StringAttr)
    order = prop_def(DenseArrayBase)
    assembly_format = "$kind $input $epilogue $mode $outs attr-dict `:` type($input) `->` type($outs)"

    def __init__(
        self,
        kind: str,
        input: SSAValue,
        outs: Sequence[SSAValue],
        dim: int,
        group: int,
        threads: int,
        epilogue: Sequence[UnaryFnAttr],
        mode: str,
        order: Sequence[int],
    ):
        super().__init__(
            operands=[input, list(outs)],
            properties={
                "kind": StringAttr(kind),
                "dim": IntegerAttr(dim, i64),
                "group": IntegerAttr(group, i64),
                "threads": IntegerAttr(threads, i64),
                "epilogue": ArrayAttr(epilogue),
                "mode": StringAttr(mode),
                "order": dense(order),
            },
        )

    def verify_(self) -> None:
        """Check the kind, mode, dim, groups, outputs and thread counts.

        Raises:
            CuteVerifyError: a kind other than sum / sum_squares / max, a bad mode or epilogue, a dim
                outside the tile, a group size that does not divide the dim, output tiles of the wrong
                number or shape (a running max: two size-1 outputs, stored, no epilogue), a max with
                group > 1, threads per output not a power of two in 1..32, a `cute.reduce_threads`
                below `threads` or not a power of two, or a bad `order`.
        """
        kind = self.kind.data
        if kind not in ("sum", "sum_squares", "max"):
            raise rule_error(self, f"kind '{kind}' must be sum, sum_squares or max")
        check_mode(self, self.mode)
        check_epilogue(self, self.epilogue)
        shape = smem_type(self.input).get_shape()
        d, g = self.dim.value.data, self.group.value.data
        if not 0 <= d < len(shape):
            raise rule_error(self, f"dim {d} is not a dimension of a rank-{len(shape)} tile")
        if g < 1 or shape[d] % g:
            raise rule_error(self, f"dim {d} (size {shape[d]}) is not divisible into groups of {g}")
        expected = list(shape)
        expected[d] = g
        running = kind == "max" and len(self.outs) == 2
        if len(self.outs) != (2 if running else 1):
            raise rule_error(self, f"kind '{kind}' writes 1 tile (2 for a running max), got {len(self.outs)}")
        for o in self.outs:
            if smem_type(o).get_shape() != tuple(expected):
                raise rule_error(self, f"result tile {smem_type(o).get_shape()} must have shape {tuple(expected)}")
        if running and (g != 1 or self.mode.data != "store" or self.epilogue.data):
            raise rule_error(self, "a running max reduces to size 1 and stores without an epilogue")
        if kind == "max" and g != 1:
            raise rule_error(self, "a max reduces to size 1 (group 1)")
        t = self.threads.value.data
        if t < 1 or t > 32 or t & (t - 1):
            raise rule_error(self, f"threads per output must be a power of two in 1..32, got {t}")
        wide = self.attributes.get(REDUCE_THREADS)
        if wide is not None and (not isinstance(wide, IntegerAttr) or wide.value.data < t or wide.value.data & (wide.value.data - 1)):
            raise rule_error(self, f"{REDUCE_THREADS} must be an integer power of two of at least threads ({t})")
        check_order(self, self.order, len(shape))


@irdl_op_definition
class ConcatOp(CuteOp):
    """`v = concat(lhs, rhs, dim)` then epilogue and store."""

    name = "cute.concat"
    lhs = operand_def(SmemTensorType)
    rhs = operand_def(SmemTensorType)
    out = operand_def(SmemTensorType)
    dim = prop_def(IntegerAttr)
    epilogue = prop_def(ArrayAttr)
    mode = prop_def(StringAttr)
    order = prop_def(DenseArrayBase)
    assembly_format = "$lhs `,` $rhs $epilogue $mode $out attr-dict `:` type($lhs) `,` type($rhs) `->` type($out)"

    def __init__(
        self,
        lhs: SSAValue,
        rhs: SSAValue,
        out: SSAValue,
        dim: int,
        epilogue: Sequence[UnaryFnAttr],
        mode: str,
        order: Sequence[int],
    ):
        super().__init__(
            operands=[lhs, rhs, out],
            properties={
                "dim": IntegerAttr(dim, i64),
                "epilogue": ArrayAttr(epilogue),
                "mode": StringAttr(mode),
                "order": dense(order),
            },
        )

    def verify_(self) -> None:
        """Check that `out` is `lhs` and `rhs` joined along `dim`.

        Raises:
            CuteVerifyError: a bad mode or epilogue, ranks that differ, `dim` out of range, other
                dims that differ, an output of another shape, or a bad `order`.
        """
        check_mode(self, self.mode)
        check_epilogue(self, self.epilogue)
        a, b, o = (smem_type(v).get_shape() for v in (self.lhs, self.rhs, self.out))
        d = self.dim.value.data
        if not (len(a) == len(b) == len(o)) or not 0 <= d < len(o):
            raise rule_error(self, "operands must have one rank and dim must be one of its dims")
        expected = list(a)
        expected[d] = a[d] + b[d]
        if any(x != y for i, (x, y) in enumerate(zip(a, b)) if i != d) or tuple(expected) != o:
            raise rule_error(self, f"concat of {a} and {b} along {d} does not give {o}")
        check_order(self, self.order, len(o))
