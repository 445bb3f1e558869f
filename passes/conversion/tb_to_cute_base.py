"""The state and shared helpers of convert-tb-to-cute's kernel builder: attribute reads with
located errors naming the pass that writes each attribute (`WRITER`), storage and shared
tile types, tiles of tb values, fusion-chain records (`Chain`), and the pass's error
(`ConvertError`).  The lowering parts are mixins on top (`tb_to_cute_io.py`,
`tb_to_cute_chains.py`); `tb_to_cute._KernelBuilder` combines them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects.builtin import ArrayAttr, BFloat16Type, DenseArrayBase, Float16Type, Float32Type, Float64Type, IntegerAttr, StringAttr
from xdsl.ir import Attribute, BlockArgument, Operation, SSAValue

from mirage_xdsl.dialects import cute, tb
from mirage_xdsl.dialects.kn import CustomizedOp, element_type_of, ints, shape_of
from mirage_xdsl.passes.conversion.register_chain import RegisterChain
from mirage_xdsl.passes.tb.layout_math import stores_fp32

PASS_NAME = "convert-tb-to-cute"


WRITER = {
    "tb.chain": "tb-fusion-chains",
    "tb.chain_pos": "tb-fusion-chains",
    "tb.strides": "tb-compute-strides",
    "tb.stage": "tb-schedule",
    "tb.level": "tb-schedule",
    "tb.swizzle": "tb-plan-swizzle",
    "tb.smem_offset": "tb-plan-smem",
    "tb.smem_offsets_pipeline": "tb-plan-smem",
    "tb.smem_size": "tb-plan-smem",
}
"""Which pass writes each attribute this pass reads (for the error message)."""


UNARY_FN = {
    tb.ExpOp: "exp",
    tb.SquareOp: "square",
    tb.SqrtOp: "sqrt",
    tb.SiluOp: "silu",
    tb.SigmoidOp: "sigmoid",
    tb.GeluOp: "gelu",
    tb.ReluOp: "relu",
    tb.LogOp: "log",
    tb.ClampOp: "clamp",
    tb.MulScalarOp: "mul_scalar",
    tb.AddScalarOp: "add_scalar",
}


BINARY_FN: dict[type[Operation], str] = {tb.AddOp: "add", tb.SubOp: "sub", tb.MulOp: "mul", tb.DivOp: "div", tb.PowOp: "pow"}


KERNEL_ELEMENT_TYPES = (Float16Type, BFloat16Type, Float32Type, Float64Type)


MAX_OFFSET = 2**31 - 1


class ConvertError(Exception):
    """Internal: (op, message) of a located failure."""

    def __init__(self, op: Operation, message: str):
        super().__init__(message)
        self.op = op
        self.message = message


def convert_error(op: Operation, rule: str) -> ConvertError:
    """A `ConvertError` on `op` whose message is `rule` prefixed with the pass name."""
    return ConvertError(op, f"{PASS_NAME}: {rule}")


def reduce_threads(num_out: int, k: int, num_threads: int) -> int:
    """Threads per output of a reduction: a power of two <= 32 (warp shuffles need whole
    warps, so 1 unless the block is a multiple of 32 threads)."""
    if num_threads % 32:
        return 1
    g = 1
    while g * 2 <= 32 and g * 2 <= k and num_out * g * 2 <= num_threads:
        g *= 2
    return g


def parse_swizzle(text: str, elem_bytes: int) -> cute.SwizzleAttr:
    """`none` / `shift` / `xor<B,M,S>` (element offsets); a Hopper GMMA swizzle over byte
    offsets (`xor<B,4,3>` on >= 2-byte elements, tb-plan-swizzle hopper-gmma) is converted
    to the equivalent element swizzle `Swizzle<B, 4 - log2(bytes), 3>`."""
    if text in ("none", "shift"):
        return cute.SwizzleAttr(text)
    if not text.startswith("xor<") or not text.endswith(">"):
        raise ValueError(f"unknown swizzle '{text}'")
    b, m, s = (int(v) for v in text[4:-1].split(","))
    if b == 0:
        return cute.SwizzleAttr.none()
    if m == 4 and s == 3 and elem_bytes >= 2:
        m -= elem_bytes.bit_length() - 1
    return cute.SwizzleAttr.xor(b, m, s)


def cute_numel(shape: Sequence[int]) -> int:
    """Number of elements of `shape` (the product of its extents; 1 for rank 0)."""
    n = 1
    for d in shape:
        n *= d
    return n


def ints_of(attr: Attribute) -> tuple[int, ...]:
    """The integers of a `DenseArrayBase` attribute (asserts that type)."""
    assert isinstance(attr, DenseArrayBase)
    return ints(attr)


@dataclass
class Chain:
    """One fusion chain of the block graph: its ops in chain order (`tb.chain_pos` 0, 1, ...),
    and the `tb.stage` ("pre", "loop" or "post") and `tb.level` of its leader.
    """
    ops: list[Operation]
    stage: str
    level: int


class KernelBuilderBase:
    """Lowering state of one `kn.customized` and the helpers every part of the builder shares."""

    kernel_arg_strides: list[tuple[int, ...]]
    """DTensor element strides of each kernel parameter (outputs, then inputs); set by `build`."""

    def __init__(self, graph: CustomizedOp, name: str, tensor_cores: bool):
        self.graph = graph
        self.name = name
        self.tensor_cores = tensor_cores
        self.nt = graph.block[0] * graph.block[1] * graph.block[2]
        self.iters = graph.num_iterations
        self.smem: dict[SSAValue, SSAValue] = {}  # tb value -> cute smem value
        self.chain_sums: dict[RegisterChain, SSAValue] = {}  # the register row sums of each cute.mma_chain
        self.pipelined: set[Operation] = set()  # inputs copied with cp.async (ring of stage buffers)
        self.num_stages = 0  # buffers per pipelined input (all of a kernel share one ring index)

    def attr(self, op: Operation, name: str) -> Attribute:
        """The attribute `name` of `op`.

        Raises:
            ConvertError: the attribute is missing (names the pass of `WRITER` that writes it).
        """
        value = op.attributes.get(name)
        if value is None:
            writer = WRITER.get(name, "mirage-transpile")
            raise convert_error(
                op,
                f"{op.name} has no '{name}' attribute; run {writer} first "
                "(mirage-transpile runs every pass in order)",
            )
        return value

    def int_attr(self, op: Operation, name: str) -> int:
        """The value of the integer attribute `name` of `op`.

        Raises:
            ConvertError: the attribute is missing or not an IntegerAttr.
        """
        value = self.attr(op, name)
        if not isinstance(value, IntegerAttr):
            raise convert_error(op, f"'{name}' must be an integer attribute")
        return value.value.data

    def stage(self, op: Operation) -> str:
        """The `tb.stage` of `op`: "pre", "loop" or "post".

        Raises:
            ConvertError: the attribute is missing or another value.
        """
        value = self.attr(op, "tb.stage")
        if not isinstance(value, StringAttr) or value.data not in ("pre", "loop", "post"):
            raise convert_error(op, "'tb.stage' must be \"pre\", \"loop\" or \"post\"")
        return value.data

    @staticmethod
    def storage_type(value: SSAValue) -> Attribute:
        """fp32 for accumulator tiles of multi-iteration graphs (passes/README.md, "Storage
        precision": `layout_math.stores_fp32`), else the tile's element type."""
        return Float32Type() if stores_fp32(value) else element_type_of(value)

    def smem_type(self, op: Operation, index: int) -> cute.SmemTensorType:
        """The shared-memory tensor type of result `index` of `op`.

        Shape of the tile, element strides from `tb.strides`, swizzle from `tb.swizzle` (via
        `parse_swizzle`), element type from `storage_type` (fp32 for multi-iteration accumulators).

        Raises:
            ConvertError: `tb.strides` or `tb.swizzle` is missing, has no entry for the result,
                does not match the tile's rank, or the swizzle text is unknown.
        """
        value = op.results[index]
        strides_attr = self.attr(op, "tb.strides")
        swz_attr = self.attr(op, "tb.swizzle")
        if not isinstance(strides_attr, ArrayAttr) or index >= len(strides_attr.data):
            raise convert_error(op, "'tb.strides' needs one array<i64> per result")
        if not isinstance(swz_attr, ArrayAttr) or index >= len(swz_attr.data):
            raise convert_error(op, "'tb.swizzle' needs one string per result")
        strides = ints_of(strides_attr.data[index])
        shape = shape_of(value)
        if len(strides) != len(shape):
            raise convert_error(op, f"'tb.strides' {strides} does not match the rank of the tile {shape}")
        elem = self.storage_type(value)
        swz_text = swz_attr.data[index]
        assert isinstance(swz_text, StringAttr)
        try:
            swizzle = parse_swizzle(swz_text.data, cute.elem_bytes(elem))
        except ValueError as err:
            raise convert_error(op, str(err)) from None
        return cute.SmemTensorType(elem, cute.LayoutAttr(shape, strides), swizzle)

    def check_element_type(self, op: Operation, typ: Attribute) -> None:
        """Check that `typ` is an element type of the CUDA backend (f16, bf16, f32, f64).

        Raises:
            ConvertError: any other type.
        """
        if not isinstance(typ, KERNEL_ELEMENT_TYPES):
            raise convert_error(op, f"element type {typ} is not supported by the CUDA backend (f16, bf16, f32, f64)")

    def tile(self, op: Operation, value: SSAValue) -> SSAValue:
        """The shared-memory (cute) value that holds tb value `value`, read by `op`.

        Raises:
            ConvertError: `value` has no shared-memory tile (its producer has `tb.smem_offset` -1,
                i.e. it is inside a fusion chain).
        """
        found = self.smem.get(value)
        if found is None:
            raise convert_error(
                op,
                f"{op.name} reads a tile that is not in shared memory (tb.smem_offset = -1 on its producer); "
                "only chain tails are materialised",
            )
        return found

    def dtensor_arg(self, value: SSAValue) -> int:
        """Input index of a dtensor: its block argument's index among the `kn.customized` inputs
        (its kernel parameter is that index plus the number of outputs)."""
        assert isinstance(value, BlockArgument)
        return value.index

    def order_for(self, leader: Operation, rank: int, avoid: int | None = None) -> list[int]:
        """Dims fastest first: the leader's `tb.iter_dim` (else the last dim), then the others
        from the last to the first."""
        attr = leader.attributes.get("tb.iter_dim")
        first = attr.value.data if isinstance(attr, IntegerAttr) else rank - 1
        if not 0 <= first < rank or first == avoid:
            first = next((d for d in reversed(range(rank)) if d != avoid), rank - 1)
        return [first] + [d for d in reversed(range(rank)) if d != first]

    def epilogue_of(self, ops: Sequence[Operation]) -> list[cute.UnaryFnAttr]:
        """The unary epilogue functions of `ops` (exp, clamp with its bounds, mul_scalar with its scalar, ...).

        Raises:
            ConvertError: an op that is not one of the elementwise unary ops of `UNARY_FN`.
        """
        fns = []
        for op in ops:
            kind = UNARY_FN.get(type(op))
            if kind is None:
                raise convert_error(op, f"{op.name} cannot be fused into a chain (only elementwise unary ops and a trailing nored)")
            if isinstance(op, tb.ClampOp):
                fns.append(cute.UnaryFnAttr(kind, (op.min_value.value.data, op.max_value.value.data)))
            elif isinstance(op, tb.MulScalarOp | tb.AddScalarOp):
                fns.append(cute.UnaryFnAttr(kind, (op.scalar.value.data,)))
            else:
                fns.append(cute.UnaryFnAttr(kind))
        return fns
