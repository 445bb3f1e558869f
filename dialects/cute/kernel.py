"""`cute.kernel` (one generated `__global__` kernel), the attributes the cute passes write on
it, the base of every op inside a kernel (`CuteOp`) with the checks ops share, and the
kernel's for-loop (`cute.for` / `cute.yield`).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from xdsl.dialects.builtin import ArrayAttr, DenseArrayBase, IndexType, IntegerAttr, StringAttr, TensorType, i64
from xdsl.ir import Attribute, Block, BlockArgument, Region, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    ParsePropInAttrDict,
    irdl_op_definition,
    lazy_traits_def,
    prop_def,
    region_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import (
    HasAncestor,
    HasParent,
    IsolatedFromAbove,
    IsTerminator,
    NoTerminator,
    SingleBlockImplicitTerminator,
    ensure_terminator,
)

from mirage_xdsl.dialects.cute.attrs import MAX_SMEM_BYTES, STORE_MODES, SmemTensorType, UnaryFnAttr, dense, dense_ints, rule_error
from mirage_xdsl.dialects.tiling import launch_geometry_error


@irdl_op_definition
class KernelOp(IRDLOperation):
    """One generated `extern "C" __global__` kernel; replaces a `kn.customized` in place.

    Operands/results are the customized op's (so the enclosing func stays valid).  The
    region's block arguments are the kernel parameters in signature order: one per result
    (output pointers) then one per operand (input pointers).  `arg_strides` holds each
    parameter's DTensor element strides, `smem_size` the dynamic shared memory in bytes
    (128-byte header included), `forloop_range` the for-loop trip count.

    Decisions of the cute passes (read by the CUDA printer): `cute.kslice_scratch`
    (`KSLICE_SCRATCH`, cute-slice-mma), `cute.reg_accums` (`REG_ACCUMS`,
    cute-register-accumulators), `cute.pdl_prefetch` and `cute.trigger_dependents`
    (`PDL_PREFETCH`, `TRIGGER_DEPENDENTS`, cute-weight-prefetch; its ops may carry
    `cute.before_pdl_wait`, `BEFORE_PDL_WAIT`, and in a megakernel's tasks
    `cute.before_grid_wait`, `BEFORE_GRID_WAIT`).
    """

    name = "cute.kernel"
    inputs = var_operand_def(TensorType)
    outputs = var_result_def(TensorType)
    kernel_name = prop_def(StringAttr)
    grid_dim = prop_def(DenseArrayBase)
    block_dim = prop_def(DenseArrayBase)
    smem_size = prop_def(IntegerAttr)
    forloop_range = prop_def(IntegerAttr)
    arg_strides = prop_def(ArrayAttr)
    body = region_def("single_block")
    traits = traits_def(IsolatedFromAbove(), NoTerminator())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "`(` $inputs `)` attr-dict-with-keyword `:` functional-type($inputs, $outputs) $body"

    def __init__(
        self,
        name: str,
        inputs: Sequence[SSAValue],
        output_types: Sequence[Attribute],
        body: Region,
        *,
        grid: Sequence[int],
        block: Sequence[int],
        smem_size: int,
        forloop_range: int,
        arg_strides: Sequence[Sequence[int]],
    ):
        super().__init__(
            operands=[list(inputs)],
            result_types=[list(output_types)],
            regions=[body],
            properties={
                "kernel_name": StringAttr(name),
                "grid_dim": dense(grid),
                "block_dim": dense(block),
                "smem_size": IntegerAttr(smem_size, i64),
                "forloop_range": IntegerAttr(forloop_range, i64),
                "arg_strides": ArrayAttr(dense(s) for s in arg_strides),
            },
        )

    @property
    def grid(self) -> tuple[int, int, int]:
        """The launch grid (x, y, z) in blocks."""
        return dense_ints(self.grid_dim)  # type: ignore[return-value]

    @property
    def block(self) -> tuple[int, int, int]:
        """The block shape (x, y, z) in threads."""
        return dense_ints(self.block_dim)  # type: ignore[return-value]

    @property
    def num_threads(self) -> int:
        """Threads per block (the product of `block`)."""
        b = self.block
        return b[0] * b[1] * b[2]

    @property
    def smem_bytes(self) -> int:
        """Dynamic shared memory per block, in bytes."""
        return self.smem_size.value.data

    @property
    def iterations(self) -> int:
        """Trip count of the block's for-loop (`forloop_range`, >= 1)."""
        return self.forloop_range.value.data

    def strides_of(self, index: int) -> tuple[int, ...]:
        """The element strides of kernel parameter `index` (outputs first, then inputs), one per dim."""
        attr = self.arg_strides.data[index]
        assert isinstance(attr, DenseArrayBase)
        return dense_ints(attr)

    def verify_(self) -> None:
        """Check the launch geometry, shared memory, loop and parameters.

        Raises:
            CuteVerifyError: an illegal grid/block (`launch_geometry_error`, CUDA's limits), smem_size
                outside [0, MAX_SMEM_BYTES] (227 KiB), forloop_range < 1, block arguments that are not
                the result types then the operand types, or `arg_strides` without one array of one
                stride per dim for every parameter.
        """
        if (err := launch_geometry_error(dense_ints(self.grid_dim), dense_ints(self.block_dim))) is not None:
            raise rule_error(self, err)
        if not 0 <= self.smem_bytes <= MAX_SMEM_BYTES:
            raise rule_error(self, f"smem_size {self.smem_bytes} B is outside [0, {MAX_SMEM_BYTES}] (227 KiB per block)")
        if self.iterations < 1:
            raise rule_error(self, f"forloop_range must be >= 1, got {self.iterations}")
        args = self.body.block.args
        expected = [*self.outputs.types, *self.inputs.types]
        if len(args) != len(expected) or any(a.type != t for a, t in zip(args, expected)):
            raise rule_error(self, "the block arguments must be the result types then the operand types, in order")
        if len(self.arg_strides) != len(args):
            raise rule_error(self, f"arg_strides needs one entry per kernel parameter ({len(args)}), got {len(self.arg_strides)}")
        for i, (arg, st) in enumerate(zip(args, self.arg_strides.data)):
            if not isinstance(st, DenseArrayBase) or len(dense_ints(st)) != len(arg.type.get_shape()):  # type: ignore[attr-defined]
                raise rule_error(self, f"arg_strides[{i}] must be an array<i64> with one stride per dim")


KSLICE_SCRATCH = "cute.kslice_scratch"
"""`array<i64: base, bytes>` on a `cute.kernel` (written by cute-slice-mma): the shared memory
in which the warp groups of sliced-K accumulators meet, appended to the kernel's plan at
`base` (its `smem_size` rounded up to 16 bytes); bytes = 0 when no accumulator is sliced.
The printer's other appended scratch (block-wide sums, the grid-sum flag) follows it."""


PDL_PREFETCH = "cute.pdl_prefetch"
"""`i64` on a `cute.kernel` (written by cute-weight-prefetch): how many cp.async loads of
kn.weight parameters it issues before the PDL wait (`mx::wait_for_prior_grids`); 0 = none."""


BEFORE_PDL_WAIT = "cute.before_pdl_wait"
"""Unit attribute on a top-level op of a `cute.kernel` (written by cute-weight-prefetch): it
is printed before the PDL wait (shared-memory pointers, accumulator initialisations and the
weight loads of the ring prologue, which nothing queued before the launch writes).  In a
megakernel task (cute-weight-prefetch{inputs-ready}) it marks the ops issued before the task's
dependency wait: the prologue loads of every graph input."""


BEFORE_GRID_WAIT = "cute.before_grid_wait"
"""Unit attribute on a top-level op of a megakernel task's `cute.kernel` (written by
cute-weight-prefetch{inputs-ready}, on a subset of the `cute.before_pdl_wait` ops): it is
printed before the worker's wait for the previous grid (`MpkGate::launch_sync`, in the
worker's first task): the shared-memory pointers, accumulator initialisations and the ring
prologue loads of kn.weight parameters."""


TRIGGER_DEPENDENTS = "cute.trigger_dependents"
"""Unit attribute on a `cute.kernel` that streams a kn.weight in its loop (written by
cute-weight-prefetch): it triggers its dependent grid at its start
(`griddepcontrol.launch_dependents`) and, under PDL, launches one wave at a time
(`KernelLaunch.one_wave`)."""


def kernel_of(op: IRDLOperation) -> KernelOp | None:
    """The `cute.kernel` enclosing `op`, or None when it is not inside one."""
    parent = op.parent_op()
    while parent is not None and not isinstance(parent, KernelOp):
        parent = parent.parent_op()
    return parent


def weight_params(kernel: KernelOp, weight_args: Collection[int]) -> frozenset[SSAValue]:
    """The body block arguments of `kernel` bound to function arguments in `weight_args`
    (indices of the enclosing `func.func`'s arguments marked `kn.weight`)."""
    nout = len(kernel.outputs)
    params = kernel.body.block.args
    return frozenset(
        params[nout + j]
        for j, value in enumerate(kernel.inputs)
        if isinstance(value, BlockArgument) and value.index in weight_args
    )


def in_kernel_traits():
    """Traits of an op that must be nested in a `cute.kernel` (lazy: `KernelOp` is defined later)."""
    return lazy_traits_def(lambda: (HasAncestor(KernelOp),))


class CuteOp(IRDLOperation):
    """Base of the cute ops that live inside a `cute.kernel` (properties are parsed from the attribute dict)."""
    traits = in_kernel_traits()
    irdl_options = (ParsePropInAttrDict(),)


def smem_type(value: SSAValue) -> SmemTensorType:
    """The `SmemTensorType` of `value` (asserts that type)."""
    typ = value.type
    assert isinstance(typ, SmemTensorType)
    return typ


def check_epilogue(op: IRDLOperation, epilogue: ArrayAttr) -> None:
    """Check that every epilogue entry is a `#cute.fn`.

    Raises:
        CuteVerifyError: an entry of another kind.
    """
    for fn in epilogue.data:
        if not isinstance(fn, UnaryFnAttr):
            raise rule_error(op, "the epilogue must be a list of #cute.fn attributes")


def check_order(op: IRDLOperation, order: DenseArrayBase, rank: int) -> None:
    """Check that `order` is a permutation of the `rank` dims (fastest first).

    Raises:
        CuteVerifyError: it is not.
    """
    if sorted(dense_ints(order)) != list(range(rank)):
        raise rule_error(op, f"order {dense_ints(order)} must be a permutation of the {rank} dims (fastest first)")


def check_mode(op: IRDLOperation, mode: StringAttr) -> None:
    """Check that `mode` is one of `STORE_MODES` (store, add, max, rescale).

    Raises:
        CuteVerifyError: it is not.
    """
    if mode.data not in STORE_MODES:
        raise rule_error(op, f"mode '{mode.data}' must be one of {', '.join(STORE_MODES)}")


@irdl_op_definition
class YieldOp(IRDLOperation):
    """`cute.yield`: the implicit terminator of a `cute.for` body."""
    name = "cute.yield"
    traits = lazy_traits_def(lambda: (IsTerminator(), HasParent(ForOp)))
    assembly_format = "attr-dict"


@irdl_op_definition
class ForOp(CuteOp):
    """`cute.for %it = 0 to R { ... }`: the block's for-loop; `%it : index` is the iteration."""

    name = "cute.for"
    upper = prop_def(IntegerAttr)
    body = region_def("single_block")
    traits = lazy_traits_def(lambda: (HasAncestor(KernelOp), SingleBlockImplicitTerminator(YieldOp)))

    def __init__(self, upper: int, body: Region | None = None):
        if body is None:
            body = Region(Block(arg_types=[IndexType()]))
        super().__init__(properties={"upper": IntegerAttr(upper, i64)}, regions=[body])
        for trait in self.get_traits_of_type(SingleBlockImplicitTerminator):
            ensure_terminator(self, trait)

    @property
    def trip_count(self) -> int:
        """The loop's trip count R (`cute.for %it = 0 to R`)."""
        return self.upper.value.data

    @property
    def iv(self) -> SSAValue:
        """The iteration index (the body's `index` argument)."""
        return self.body.block.args[0]

    def print(self, printer: Printer) -> None:
        """Print `%it = 0 to R { body } {attrs}`."""
        printer.print_string(" ")
        printer.print_ssa_value(self.iv)
        printer.print_string(f" = 0 to {self.trip_count} ")
        printer.print_region(self.body, print_entry_block_args=False, print_block_terminators=False)
        printer.print_op_attributes(self.attributes)

    @classmethod
    def parse(cls, parser: Parser) -> ForOp:
        """Parse `%it = 0 to R { body } {attrs}`.

        Raises:
            ParseError: malformed text or a lower bound other than 0.
        """
        arg = parser.parse_argument(expect_type=False)
        parser.parse_punctuation("=")
        start = parser.pos
        lower = parser.parse_integer(allow_boolean=False)
        if lower != 0:
            parser.raise_error("cute.for: loops start at 0", start, parser.pos)
        parser.parse_keyword("to")
        upper = parser.parse_integer(allow_boolean=False)
        body = parser.parse_region((arg.resolve(IndexType()),))
        attrs = parser.parse_optional_attr_dict()
        op = cls(upper, body)
        op.attributes |= attrs
        return op

    def verify_(self) -> None:
        """Check the trip count and the body's argument.

        Raises:
            CuteVerifyError: a trip count < 1, or a body without exactly one `index` argument.
        """
        if self.trip_count < 1:
            raise rule_error(self, f"trip count must be >= 1, got {self.trip_count}")
        args = self.body.block.args
        if len(args) != 1 or not isinstance(args[0].type, IndexType):
            raise rule_error(self, "the body takes exactly one index argument (the iteration)")
