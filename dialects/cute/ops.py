"""`cute`: the CuTe-level kernel IR that the CUDA printer turns into C++ (one op ~ one call).

`convert-tb-to-cute` lowers every scheduled, memory-planned `kn.customized` to a
`cute.kernel` whose body is the kernel's straight-line program in execution order:

* `cute.smem_alloc`: a shared-memory tile at a planned byte offset (N offsets = the ring
  of N stage buffers of a cp.async-pipelined input; iteration `it` uses `it % N`); its type `!cute.smem<f16, (2,128):(128,1),
  xor<3,3,4>>` carries the element type, the layout `(shape):(stride)` (dims outermost
  first, strides in elements) and the swizzle (`xor<B,M,S>` = CuTe `Swizzle<B,M,S>` applied
  to the element offset; `shift` = padding already folded into the strides).
* `cute.copy_g2s` / `cute.copy_s2g`: tile copies between a kernel argument (a DTensor)
  and shared memory: `sync` (element-wise), `chunked` (16-byte vectors) or `async`
  (16-byte `cp.async`, with `cute.cp_async_commit` / `cute.cp_async_wait`).
* `cute.fill` (clear an accumulator), `cute.elementwise` (a fusion chain: leader + unary
  epilogue + store/accumulate), `cute.reduce` (sum or running max over one dim with
  STRIDED groups), `cute.concat`, `cute.mma_init` / `cute.mma` / `cute.frag_store` (a tiled
  MMA whose fp32 accumulator fragment lives in registers; `cute.mma_chain` = matmul ->
  epilogue -> matmul with the intermediate kept in registers), `cute.barrier`, `cute.for`.

Every verifier message reads `cute.<op>: <rule>`.  Math is fp32; tiles produced by
accumulators are fp32 in shared memory (passes/README.md, "Storage precision").
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Sequence

from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseArrayBase,
    Float32Type,
    FloatAttr,
    IndexType,
    IntAttr,
    IntegerAttr,
    StringAttr,
    TensorType,
    f64,
    i64,
)
from xdsl.ir import Attribute, Block, BlockArgument, Dialect, ParametrizedAttribute, Region, SSAValue, TypeAttribute
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    ParsePropInAttrDict,
    irdl_attr_definition,
    irdl_op_definition,
    lazy_traits_def,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import AttrParser, Parser
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
from xdsl.utils.exceptions import VerifyException

from mirage_xdsl.dialects.cute.hopper_gemm import HopperGemmOp
from mirage_xdsl.dialects.tiling import launch_geometry_error
from mirage_xdsl.target import SM90

MAX_SMEM_BYTES = SM90.smem_per_block_optin
"""Largest dynamic shared memory a block may opt into on sm_90 (227 KiB)."""
MAX_STAGES = 8
"""Most buffers of one pipelined tile (`cp.async.wait_group` counts up to 7 here)."""
MAX_RANK = 4

UNARY_FNS: dict[str, int] = {
    "exp": 0,
    "square": 0,
    "sqrt": 0,
    "silu": 0,
    "sigmoid": 0,
    "gelu": 0,
    "relu": 0,
    "log": 0,
    "clamp": 2,
    "mul_scalar": 1,
}
"""Epilogue functions and their number of float parameters."""

LEADER_FNS: dict[str, int] = {"id": 1, "add": 2, "sub": 2, "mul": 2, "div": 2, "pow": 2}
"""`cute.elementwise` leaders and their arity."""

STORE_MODES = ("store", "add", "max", "rescale")
"""How a computed value `v` meets the destination `o`: `o = v`, `o += v`, `o = max(o, v)`,
`o = o * s + v` (`s` = the last input, broadcast)."""

COPY_MODES_G2S = ("sync", "chunked", "async")
COPY_MODES_S2G = ("sync", "chunked")


class CuteVerifyError(VerifyException):
    """A cute op breaks a rule; the message names the op and the rule."""


def _fail(op: IRDLOperation, rule: str) -> CuteVerifyError:
    return CuteVerifyError(f"{op.name}: {rule}")


def int_tuple(values: ArrayAttr[IntAttr]) -> tuple[int, ...]:
    return tuple(v.data for v in values.data)


def _int_array(values: Sequence[int]) -> ArrayAttr[IntAttr]:
    return ArrayAttr(IntAttr(int(v)) for v in values)


def dense(values: Sequence[int]) -> DenseArrayBase:
    return DenseArrayBase.from_list(i64, [int(v) for v in values])


def smem_shape(value: SSAValue) -> tuple[int, ...]:
    """Shape (elements per dim) of a shared-memory tile value.

    Raises:
        TypeError: the value is not a `!cute.smem` tile.
    """
    typ = value.type
    if not isinstance(typ, SmemTensorType):
        raise TypeError(f"expected a !cute.smem tile, got {typ}")
    return tuple(typ.get_shape())


def dense_ints(attr: DenseArrayBase) -> tuple[int, ...]:
    return tuple(int(v) for v in attr.get_values())  # type: ignore[misc]  # xDSL types get_values for integer arrays only


def _parse_int_tuple(parser: AttrParser) -> list[int]:
    return parser.parse_comma_separated_list(parser.Delimiter.PAREN, lambda: parser.parse_integer(allow_boolean=False))


def _fmt_tuple(values: Sequence[int]) -> str:
    return "(" + ",".join(str(v) for v in values) + ")"


def format_float(value: float) -> str:
    """A float literal the MLIR lexer reads back exactly (always has a '.')."""
    text = repr(float(value))
    if "inf" in text or "nan" in text:
        raise ValueError(f"cannot print the non-finite float {value} in cute IR")
    mant, _, exp = text.partition("e")
    if "." not in mant:
        mant += ".0"
    return mant + ("e" + exp if exp else "")


# ---------------------------------------------------------------------------------------
# Attributes and types


@irdl_attr_definition
class LayoutAttr(ParametrizedAttribute):
    """`#cute.layout<(2,128):(128,1)>`: shape and element strides, dims outermost first."""

    name = "cute.layout"

    shape: ArrayAttr[IntAttr]
    stride: ArrayAttr[IntAttr]

    def __init__(self, shape: Sequence[int], stride: Sequence[int]):
        super().__init__(_int_array(shape), _int_array(stride))

    @property
    def dims(self) -> tuple[int, ...]:
        return int_tuple(self.shape)

    @property
    def strides(self) -> tuple[int, ...]:
        return int_tuple(self.stride)

    def cosize(self) -> int:
        """1 + the largest offset the layout reaches."""
        return 1 + sum((d - 1) * s for d, s in zip(self.dims, self.strides))

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            return _parse_layout_body(parser)

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string(f"<{self.text()}>")

    def text(self) -> str:
        return f"{_fmt_tuple(self.dims)}:{_fmt_tuple(self.strides)}"

    def verify(self) -> None:
        dims, strides = self.dims, self.strides
        if len(dims) != len(strides):
            raise VerifyException(f"cute.layout: shape {dims} and stride {strides} differ in rank")
        if not 1 <= len(dims) <= MAX_RANK:
            raise VerifyException(f"cute.layout: rank must be 1..{MAX_RANK}, got {len(dims)}")
        if any(d < 1 for d in dims) or any(s < 0 for s in strides):
            raise VerifyException(f"cute.layout: sizes must be positive and strides non-negative, got {self.text()}")


def _parse_layout_body(parser: AttrParser) -> tuple[ArrayAttr[IntAttr], ArrayAttr[IntAttr]]:
    start = parser.pos
    shape = _parse_int_tuple(parser)
    parser.parse_punctuation(":")
    stride = _parse_int_tuple(parser)
    if len(shape) != len(stride):
        parser.raise_error("cute.layout: shape and stride must have the same rank", start, parser.pos)
    return _int_array(shape), _int_array(stride)


@irdl_attr_definition
class SwizzleAttr(ParametrizedAttribute):
    """`#cute.swizzle<3,3,4>` (CuTe `Swizzle<B,M,S>`: `o ^ ((o >> S) & (((1<<B)-1) << M))` on
    the element offset), `#cute.swizzle<shift>` (padding in the strides) or `<none>`."""

    name = "cute.swizzle"

    kind: StringAttr
    bits: ArrayAttr[IntAttr]

    def __init__(self, kind: str, bits: Sequence[int] = (0, 0, 0)):
        super().__init__(StringAttr(kind), _int_array(bits))

    @staticmethod
    def xor(b: int, m: int, s: int) -> SwizzleAttr:
        return SwizzleAttr("xor", (b, m, s))

    @staticmethod
    def none() -> SwizzleAttr:
        return SwizzleAttr("none")

    @property
    def is_xor(self) -> bool:
        return self.kind.data == "xor"

    @property
    def bms(self) -> tuple[int, int, int]:
        b, m, s = int_tuple(self.bits)
        return b, m, s

    def text(self) -> str:
        if self.is_xor:
            return "xor<{},{},{}>".format(*self.bms)
        return self.kind.data

    def apply(self, offset: int) -> int:
        if not self.is_xor:
            return offset
        b, m, s = self.bms
        return offset ^ ((offset >> s) & (((1 << b) - 1) << m))

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            return _parse_swizzle_body(parser, bare=True)

    def print_parameters(self, printer: Printer) -> None:
        if self.is_xor:
            printer.print_string("<{},{},{}>".format(*self.bms))
        else:
            printer.print_string(f"<{self.kind.data}>")

    def verify(self) -> None:
        kind = self.kind.data
        if kind not in ("xor", "shift", "none"):
            raise VerifyException(f"cute.swizzle: kind must be xor, shift or none, got '{kind}'")
        if len(self.bits) != 3:
            raise VerifyException("cute.swizzle: needs three parameters B, M, S")
        if kind == "xor":
            b, m, s = self.bms
            if b < 1 or m < 0 or s < b:
                raise VerifyException(f"cute.swizzle: Swizzle<{b},{m},{s}> needs B >= 1, M >= 0 and S >= B")


def _parse_swizzle_body(parser: AttrParser, bare: bool) -> tuple[StringAttr, ArrayAttr[IntAttr]]:
    """`3,3,4` (bare, inside #cute.swizzle<...>) or `xor<3,3,4>`; `shift`; `none`."""
    start = parser.pos
    if bare and (first := parser.parse_optional_integer(allow_boolean=False)) is not None:
        parser.parse_punctuation(",")
        m = parser.parse_integer(allow_boolean=False)
        parser.parse_punctuation(",")
        s = parser.parse_integer(allow_boolean=False)
        return StringAttr("xor"), _int_array((first, m, s))
    kind = parser.parse_identifier()
    if kind == "xor":
        parser.parse_punctuation("<")
        b = parser.parse_integer(allow_boolean=False)
        parser.parse_punctuation(",")
        m = parser.parse_integer(allow_boolean=False)
        parser.parse_punctuation(",")
        s = parser.parse_integer(allow_boolean=False)
        parser.parse_punctuation(">")
        return StringAttr("xor"), _int_array((b, m, s))
    if kind not in ("shift", "none"):
        parser.raise_error(f"cute.swizzle: expected xor<B,M,S>, shift or none, got '{kind}'", start, parser.pos)
    return StringAttr(kind), _int_array((0, 0, 0))


@irdl_attr_definition
class SmemTensorType(ParametrizedAttribute, TypeAttribute):
    """`!cute.smem<f16, (2,128):(128,1), xor<3,3,4>>`: a shared-memory tile."""

    name = "cute.smem"

    element_type: Attribute
    layout: LayoutAttr
    swizzle: SwizzleAttr

    def __init__(self, element_type: Attribute, layout: LayoutAttr, swizzle: SwizzleAttr | None = None):
        super().__init__(element_type, layout, swizzle or SwizzleAttr.none())

    def get_shape(self) -> tuple[int, ...]:
        return self.layout.dims

    def get_element_type(self) -> Attribute:
        return self.element_type

    @property
    def strides(self) -> tuple[int, ...]:
        return self.layout.strides

    def cosize(self) -> int:
        """Number of elements the tile spans, swizzle included."""
        top = self.layout.cosize() - 1
        if self.swizzle.is_xor:
            b, m, _ = self.swizzle.bms
            top |= (1 << (m + b)) - 1
        return top + 1

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            element_type = parser.parse_type()
            parser.parse_punctuation(",")
            shape, stride = _parse_layout_body(parser)
            swizzle = (StringAttr("none"), _int_array((0, 0, 0)))
            if parser.parse_optional_punctuation(","):
                swizzle = _parse_swizzle_body(parser, bare=False)
        return (element_type, LayoutAttr.new((shape, stride)), SwizzleAttr.new(swizzle))

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string("<")
        printer.print_attribute(self.element_type)
        printer.print_string(f", {self.layout.text()}")
        if self.swizzle.kind.data != "none":
            printer.print_string(f", {self.swizzle.text()}")
        printer.print_string(">")


@irdl_attr_definition
class TiledMmaAttr(ParametrizedAttribute):
    """`#cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (1,3)>`: MMA atom and the (tg_m, tg_n)
    warp layout (`UniversalFMA` with thr_layout (threads, 1) is the CUDA-core fallback)."""

    name = "cute.tiled_mma"

    atom: StringAttr
    thr_layout: ArrayAttr[IntAttr]

    def __init__(self, atom: str, thr_layout: Sequence[int]):
        super().__init__(StringAttr(atom), _int_array(thr_layout))

    @property
    def atom_name(self) -> str:
        return self.atom.data

    @property
    def tg(self) -> tuple[int, int]:
        m, n = int_tuple(self.thr_layout)
        return m, n

    @property
    def atom_shape(self) -> tuple[int, int, int]:
        """(M, N, K) of one atom; (1, 1, 1) for UniversalFMA."""
        if self.atom_name == "UniversalFMA":
            return (1, 1, 1)
        dims = self.atom_name.split("_")[1].split("x")
        return int(dims[0]), int(dims[1]), int(dims[2])

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            atom = parser.parse_identifier()
            parser.parse_punctuation(",")
            tg = _parse_int_tuple(parser)
        return (StringAttr(atom), _int_array(tg))

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string(f"<{self.atom_name}, {_fmt_tuple(self.tg)}>")

    def verify(self) -> None:
        if len(self.thr_layout) != 2 or any(v < 1 for v in self.tg):
            raise VerifyException("cute.tiled_mma: thr_layout must be two positive sizes (tg_m, tg_n)")
        if self.atom_name not in MMA_ATOMS:
            raise VerifyException(
                f"cute.tiled_mma: unknown atom '{self.atom_name}' (expected one of {', '.join(MMA_ATOMS)})"
            )


MMA_ATOMS = (
    "SM80_16x8x16_F32F16F16F32_TN",
    "SM80_16x8x8_F32F16F16F32_TN",
    "SM80_16x8x16_F32BF16BF16F32_TN",
    "SM80_16x8x8_F32BF16BF16F32_TN",
    "UniversalFMA",
)


@irdl_attr_definition
class FragmentType(ParametrizedAttribute, TypeAttribute):
    """`!cute.frag<2x24xf32, #cute.tiled_mma<...>>`: an fp32 MxN accumulator held in registers,
    distributed over the threads as the tiled MMA dictates."""

    name = "cute.frag"

    shape: ArrayAttr[IntAttr]
    element_type: Attribute
    mma: TiledMmaAttr

    def __init__(self, shape: Sequence[int], mma: TiledMmaAttr, element_type: Attribute | None = None):
        super().__init__(_int_array(shape), element_type or Float32Type(), mma)

    def get_shape(self) -> tuple[int, ...]:
        return int_tuple(self.shape)

    def slice_scratch_bytes(self, slices: int) -> int:
        """Shared memory in which `slices` K slices of this tensor-core accumulator meet
        (mma.cuh `MmaAcc::kScratchFloats`: slices 1.. park one fp32 fragment per warp of
        the thr_layout, FM x FN atom blocks of 4 floats per lane)."""
        m, n = self.get_shape()
        tgm, tgn = self.mma.tg
        fm = math.ceil(math.ceil(m / 16) / tgm)
        fn = math.ceil(math.ceil(n / 8) / tgn)
        return (slices - 1) * tgm * tgn * 32 * fm * fn * 4 * 4

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            dims, element_type = parser.parse_ranked_shape()
            parser.parse_punctuation(",")
            mma = parser.parse_attribute()
        return (_int_array(dims), element_type, mma)

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string("<" + "x".join(str(d) for d in self.get_shape()) + "x")
        printer.print_attribute(self.element_type)
        printer.print_string(", ")
        printer.print_attribute(self.mma)
        printer.print_string(">")

    def verify(self) -> None:
        if len(self.shape) != 2 or any(d.data < 1 for d in self.shape):
            raise VerifyException("cute.frag: shape must be two positive sizes (M, N)")
        if not isinstance(self.element_type, Float32Type):
            raise VerifyException("cute.frag: accumulators are fp32")
        if not isinstance(self.mma, TiledMmaAttr):
            raise VerifyException("cute.frag: the third parameter must be a #cute.tiled_mma")


@irdl_attr_definition
class UnaryFnAttr(ParametrizedAttribute):
    """`#cute.fn<exp>`, `#cute.fn<mul_scalar(0.25)>`, `#cute.fn<clamp(0.0,1.0)>`: one epilogue step."""

    name = "cute.fn"

    fn: StringAttr
    params: ArrayAttr[FloatAttr]

    def __init__(self, fn: str, params: Sequence[float] = ()):
        super().__init__(StringAttr(fn), ArrayAttr(FloatAttr(float(p), f64) for p in params))

    @property
    def fn_name(self) -> str:
        return self.fn.data

    @property
    def values(self) -> tuple[float, ...]:
        return tuple(float(p.value.data) for p in self.params.data)

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            fn = parser.parse_identifier()
            params: list[float] = []
            if parser.parse_optional_punctuation("("):
                params.append(float(parser.parse_number()))
                while parser.parse_optional_punctuation(","):
                    params.append(float(parser.parse_number()))
                parser.parse_punctuation(")")
        return (StringAttr(fn), ArrayAttr(FloatAttr(p, f64) for p in params))

    def print_parameters(self, printer: Printer) -> None:
        text = self.fn_name
        if self.params.data:
            text += "(" + ",".join(format_float(v) for v in self.values) + ")"
        printer.print_string(f"<{text}>")

    def verify(self) -> None:
        fn = self.fn.data
        if fn not in UNARY_FNS:
            raise VerifyException(f"cute.fn: unknown function '{fn}' (expected one of {', '.join(UNARY_FNS)})")
        if len(self.params) != UNARY_FNS[fn]:
            raise VerifyException(f"cute.fn: '{fn}' takes {UNARY_FNS[fn]} parameters, got {len(self.params)}")
        if fn == "clamp" and self.values[0] > self.values[1]:
            raise VerifyException("cute.fn: clamp needs min <= max")


# ---------------------------------------------------------------------------------------
# The kernel


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
    `cute.before_pdl_wait`, `BEFORE_PDL_WAIT`).
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
        return dense_ints(self.grid_dim)  # type: ignore[return-value]

    @property
    def block(self) -> tuple[int, int, int]:
        return dense_ints(self.block_dim)  # type: ignore[return-value]

    @property
    def num_threads(self) -> int:
        b = self.block
        return b[0] * b[1] * b[2]

    @property
    def smem_bytes(self) -> int:
        return self.smem_size.value.data

    @property
    def iterations(self) -> int:
        return self.forloop_range.value.data

    def strides_of(self, index: int) -> tuple[int, ...]:
        attr = self.arg_strides.data[index]
        assert isinstance(attr, DenseArrayBase)
        return dense_ints(attr)

    def verify_(self) -> None:
        if (err := launch_geometry_error(dense_ints(self.grid_dim), dense_ints(self.block_dim))) is not None:
            raise _fail(self, err)
        if not 0 <= self.smem_bytes <= MAX_SMEM_BYTES:
            raise _fail(self, f"smem_size {self.smem_bytes} B is outside [0, {MAX_SMEM_BYTES}] (227 KiB per block)")
        if self.iterations < 1:
            raise _fail(self, f"forloop_range must be >= 1, got {self.iterations}")
        args = self.body.block.args
        expected = [*self.outputs.types, *self.inputs.types]
        if len(args) != len(expected) or any(a.type != t for a, t in zip(args, expected)):
            raise _fail(self, "the block arguments must be the result types then the operand types, in order")
        if len(self.arg_strides) != len(args):
            raise _fail(self, f"arg_strides needs one entry per kernel parameter ({len(args)}), got {len(self.arg_strides)}")
        for i, (arg, st) in enumerate(zip(args, self.arg_strides.data)):
            if not isinstance(st, DenseArrayBase) or len(dense_ints(st)) != len(arg.type.get_shape()):  # type: ignore[attr-defined]
                raise _fail(self, f"arg_strides[{i}] must be an array<i64> with one stride per dim")


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
weight loads of the ring prologue, which nothing queued before the launch writes)."""
TRIGGER_DEPENDENTS = "cute.trigger_dependents"
"""Unit attribute on a `cute.kernel` that streams a kn.weight in its loop (written by
cute-weight-prefetch): it triggers its dependent grid at its start
(`griddepcontrol.launch_dependents`) and, under PDL, launches one wave at a time
(`KernelLaunch.one_wave`)."""


def kernel_of(op: IRDLOperation) -> KernelOp | None:
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


def _in_kernel_traits():
    return lazy_traits_def(lambda: (HasAncestor(KernelOp),))


class CuteOp(IRDLOperation):
    traits = _in_kernel_traits()
    irdl_options = (ParsePropInAttrDict(),)


def _smem(value: SSAValue) -> SmemTensorType:
    typ = value.type
    assert isinstance(typ, SmemTensorType)
    return typ


def _check_epilogue(op: IRDLOperation, epilogue: ArrayAttr) -> None:
    for fn in epilogue.data:
        if not isinstance(fn, UnaryFnAttr):
            raise _fail(op, "the epilogue must be a list of #cute.fn attributes")


def _check_order(op: IRDLOperation, order: DenseArrayBase, rank: int) -> None:
    if sorted(dense_ints(order)) != list(range(rank)):
        raise _fail(op, f"order {dense_ints(order)} must be a permutation of the {rank} dims (fastest first)")


def _check_mode(op: IRDLOperation, mode: StringAttr) -> None:
    if mode.data not in STORE_MODES:
        raise _fail(op, f"mode '{mode.data}' must be one of {', '.join(STORE_MODES)}")


# ---------------------------------------------------------------------------------------
# Shared memory and copies


@irdl_op_definition
class SmemAllocOp(CuteOp):
    """`%s = cute.smem_alloc [128] : !cute.smem<...>`; `[128, 640, 1152]`: the ring of stage
    buffers of a cp.async-pipelined input (iteration `it` uses buffer `it % N`; copies with
    `iter_offset = d` fill buffer `(it + d) % N`)."""

    name = "cute.smem_alloc"
    result = result_def(SmemTensorType)
    offsets = prop_def(DenseArrayBase)

    def __init__(self, typ: SmemTensorType, offsets: Sequence[int]):
        super().__init__(result_types=[typ], properties={"offsets": dense(offsets)})

    @property
    def byte_offsets(self) -> tuple[int, ...]:
        return dense_ints(self.offsets)

    @property
    def num_buffers(self) -> int:
        return len(self.byte_offsets)

    def print(self, printer: Printer) -> None:
        printer.print_string(" [" + ", ".join(str(o) for o in self.byte_offsets) + "]")
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.result.type)

    @classmethod
    def parse(cls, parser: Parser) -> SmemAllocOp:
        offsets = parser.parse_comma_separated_list(
            parser.Delimiter.SQUARE, lambda: parser.parse_integer(allow_boolean=False)
        )
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        typ = parser.parse_type()
        op = cls.create(result_types=[typ], properties={"offsets": dense(offsets)}, attributes=attrs)
        return op

    def verify_(self) -> None:
        offs = self.byte_offsets
        if not 1 <= len(offs) <= MAX_STAGES:
            raise _fail(self, f"needs one offset (or 2..{MAX_STAGES} for the stage buffers of a pipelined tile)")
        typ = _smem(self.result)
        elem = _elem_bytes(typ.element_type)
        size = typ.cosize() * elem
        for off in offs:
            if off < 0 or off % 16:
                raise _fail(self, f"offset {off} must be a non-negative multiple of 16 bytes")
        ranked = sorted(offs)
        for lo, hi in zip(ranked, ranked[1:]):
            if lo + size > hi:
                raise _fail(self, f"stage buffers at {lo} and {hi} overlap ({size} B each)")
        kernel = kernel_of(self)
        if kernel is not None:
            for off in offs:
                if off + size > kernel.smem_bytes:
                    raise _fail(
                        self,
                        f"tile [{off}, {off + size}) does not fit in the kernel's {kernel.smem_bytes} B of shared memory",
                    )


def _elem_bytes(typ: Attribute) -> int:
    width = getattr(typ, "bitwidth", None)
    if width is None:
        width = getattr(typ, "width", None)
        width = width.data if width is not None else None
    if width is None:
        raise VerifyException(f"cute: element type {typ} has no known size")
    return max(1, int(width) // 8)


def tile_byte_range(value: SSAValue) -> tuple[int, int] | None:
    """[start, end) in bytes of the shared tile `value` when it is one `cute.smem_alloc`
    buffer (swizzle included); None for a ring of stage buffers or anything else."""
    owner = value.owner
    if not isinstance(owner, SmemAllocOp) or len(owner.byte_offsets) != 1:
        return None
    typ = value.type
    assert isinstance(typ, SmemTensorType)
    start = owner.byte_offsets[0]
    return start, start + typ.cosize() * elem_bytes(typ.element_type)


def disjoint_tiles(writes: Iterable[SSAValue], reads: Iterable[SSAValue]) -> bool:
    """Whether every tile is a single `cute.smem_alloc` buffer and no tile of `writes`
    shares a byte with a tile of `reads`: what lets threads write some tiles while others
    still read (no barrier in between)."""
    w = [tile_byte_range(v) for v in writes]
    r = [tile_byte_range(v) for v in reads]
    if any(x is None for x in w + r):
        return False
    return not any(a[0] < b[1] and b[0] < a[1] for a in w for b in r)  # type: ignore[index]


def elem_bytes(typ: Attribute) -> int:
    """Bytes per element of a builtin scalar type."""
    return _elem_bytes(typ)


class _CopyBase(CuteOp):
    mode = prop_def(StringAttr)
    tile = prop_def(LayoutAttr)
    block_offset = prop_def(DenseArrayBase)
    vec = prop_def(IntegerAttr)

    def _check_common(self, gmem: SSAValue, smem: SmemTensorType, modes: Sequence[str]) -> None:
        if self.mode.data not in modes:
            raise _fail(self, f"mode '{self.mode.data}' must be one of {', '.join(modes)}")
        if self.tile.dims != smem.get_shape():
            raise _fail(self, f"tile shape {self.tile.dims} differs from the shared tile {smem.get_shape()}")
        gtype = gmem.type
        assert isinstance(gtype, TensorType)
        if len(gtype.get_shape()) != len(self.tile.dims):
            raise _fail(self, "the tile and the DTensor differ in rank")
        if len(dense_ints(self.block_offset)) != 3:
            raise _fail(self, "block_offset needs 3 entries (elements per blockIdx.x, .y, .z)")
        vec = self.vec.value.data
        if vec < 1:
            raise _fail(self, f"vec must be >= 1, got {vec}")
        if self.mode.data != "sync":
            ebytes = _elem_bytes(gtype.element_type)
            if vec * ebytes != 16:
                raise _fail(self, f"a {self.mode.data} copy moves 16-byte vectors: vec must be {16 // ebytes}")
            inner = [d for d, s in enumerate(self.tile.strides) if s == 1 and self.tile.dims[d] > 1]
            if len(inner) != 1 or self.tile.dims[inner[0]] % vec:
                raise _fail(self, "a chunked copy needs one unit-stride dim whose size is a multiple of vec")
            if any(s % vec for d, s in enumerate(self.tile.strides) if d != inner[0] and self.tile.dims[d] > 1):
                raise _fail(self, "a chunked copy needs every other DTensor stride to be a multiple of vec")
            if any(o % vec for o in dense_ints(self.block_offset)):
                raise _fail(self, "a chunked copy needs block offsets that are multiples of vec")


L2_EVICT_FIRST = "cute.l2_evict_first"
"""Unit attribute on a `cute.copy_g2s` (cp.async mode): load with an L2 evict_first policy,
for a stream each launch reads once (a kn.weight), so it does not displace lines that other
blocks read again (set by cute-late-finisher)."""


@irdl_op_definition
class CopyG2SOp(_CopyBase):
    """Load one tile of DTensor `src` into `dst`.  The tile of block (x, y, z) in iteration
    `it` starts at element `x*bo[0] + y*bo[1] + z*bo[2] + (it + iter_offset)*iter_stride`;
    without an iteration operand (a pipeline prologue) `iter_offset` is the iteration itself.
    A ring `dst` of N buffers receives it in buffer `(it + iter_offset) % N`; inside a loop a
    positive `iter_offset` is skipped past the last iteration.  `tile` gives the tile shape
    with the DTensor's strides."""

    name = "cute.copy_g2s"
    src = operand_def(TensorType)
    dst = operand_def(SmemTensorType)
    iter = opt_operand_def(IndexType)
    iter_stride = prop_def(IntegerAttr)
    iter_offset = prop_def(IntegerAttr)
    assembly_format = "$mode $src (`[` $iter^ `]`)? `->` $dst attr-dict `:` type($src) `->` type($dst)"

    def __init__(
        self,
        mode: str,
        src: SSAValue,
        dst: SSAValue,
        tile: LayoutAttr,
        block_offset: Sequence[int],
        vec: int,
        iter: SSAValue | None = None,
        iter_stride: int = 0,
        iter_offset: int = 0,
    ):
        super().__init__(
            operands=[src, dst, [iter] if iter is not None else []],
            properties={
                "mode": StringAttr(mode),
                "tile": tile,
                "block_offset": dense(block_offset),
                "vec": IntegerAttr(vec, i64),
                "iter_stride": IntegerAttr(iter_stride, i64),
                "iter_offset": IntegerAttr(iter_offset, i64),
            },
        )

    def verify_(self) -> None:
        smem = _smem(self.dst)
        self._check_common(self.src, smem, COPY_MODES_G2S)
        src_type = self.src.type
        assert isinstance(src_type, TensorType)
        if src_type.element_type != smem.element_type:
            raise _fail(self, "a load keeps the element type: the DTensor and the shared tile must agree")
        if self.iter_offset.value.data < 0:
            raise _fail(self, "iter_offset must be non-negative")
        if self.mode.data == "async" and self.iter_stride.value.data and self.vec.value.data and (
            self.iter_stride.value.data % self.vec.value.data
        ):
            raise _fail(self, "an async copy needs an iteration stride that is a multiple of vec")


@irdl_op_definition
class CopyS2GOp(_CopyBase):
    """Store tile `src` into DTensor `dst` at element `x*bo[0] + y*bo[1] + z*bo[2]`
    (converting from fp32 when `src` is an accumulator)."""

    name = "cute.copy_s2g"
    src = operand_def(SmemTensorType)
    dst = operand_def(TensorType)
    assembly_format = "$mode $src `->` $dst attr-dict `:` type($src) `->` type($dst)"

    def __init__(self, mode: str, src: SSAValue, dst: SSAValue, tile: LayoutAttr, block_offset: Sequence[int], vec: int):
        super().__init__(
            operands=[src, dst],
            properties={
                "mode": StringAttr(mode),
                "tile": tile,
                "block_offset": dense(block_offset),
                "vec": IntegerAttr(vec, i64),
            },
        )

    def verify_(self) -> None:
        self._check_common(self.dst, _smem(self.src), COPY_MODES_S2G)


@irdl_op_definition
class CpAsyncCommitOp(CuteOp):
    """`cp.async.commit_group`: close the group of cp.async copies issued so far."""

    name = "cute.cp_async_commit"
    assembly_format = "attr-dict"


@irdl_op_definition
class CpAsyncWaitOp(CuteOp):
    """`cp.async.wait_group N`: wait until at most `pending` groups are in flight."""

    name = "cute.cp_async_wait"
    pending = prop_def(IntegerAttr)

    def __init__(self, pending: int):
        super().__init__(properties={"pending": IntegerAttr(pending, i64)})

    def print(self, printer: Printer) -> None:
        printer.print_string(f" {self.pending.value.data}")
        printer.print_op_attributes(self.attributes)

    @classmethod
    def parse(cls, parser: Parser) -> CpAsyncWaitOp:
        pending = parser.parse_integer(allow_boolean=False)
        attrs = parser.parse_optional_attr_dict()
        return cls.create(properties={"pending": IntegerAttr(pending, i64)}, attributes=attrs)

    def verify_(self) -> None:
        if not 0 <= self.pending.value.data <= 7:
            raise _fail(self, "pending must be in 0..7")


@irdl_op_definition
class BarrierOp(CuteOp):
    """`__syncthreads()`."""

    name = "cute.barrier"
    assembly_format = "attr-dict"


# ---------------------------------------------------------------------------------------
# Compute


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
        return float(self.value.value.data)

    def print(self, printer: Printer) -> None:
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
        fn = self.fn.data
        if fn not in LEADER_FNS:
            raise _fail(self, f"fn '{fn}' must be one of {', '.join(LEADER_FNS)}")
        _check_mode(self, self.mode)
        arity = LEADER_FNS[fn] + (1 if self.mode.data == "rescale" else 0)
        if len(self.ins) != arity:
            raise _fail(self, f"fn '{fn}' with mode '{self.mode.data}' takes {arity} inputs, got {len(self.ins)}")
        _check_epilogue(self, self.epilogue)
        out_shape = _smem(self.out).get_shape()
        for i, v in enumerate(self.ins):
            shape = _smem(v).get_shape()
            if len(shape) != len(out_shape) or any(a != b and a != 1 for a, b in zip(shape, out_shape)):
                raise _fail(self, f"input #{i} of shape {shape} does not broadcast to the output shape {out_shape}")
        _check_order(self, self.order, len(out_shape))


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
        return self.dim.value.data

    @property
    def partner_trip_count(self) -> int | None:
        """Iterations of each partner under the late finisher (None: every block runs the loop)."""
        return None if self.partner_trips is None else self.partner_trips.value.data

    def verify_(self) -> None:
        if len(self.ins) != len(self.outs) or not self.ins:
            raise _fail(self, f"needs one output tile per input tile, got {len(self.ins)} and {len(self.outs)}")
        for i, (a, b) in enumerate(zip(self.ins, self.outs)):
            if _smem(a).get_shape() != _smem(b).get_shape():
                raise _fail(self, f"tile #{i}: input shape {_smem(a).get_shape()} differs from output {_smem(b).get_shape()}")
        if not 0 <= self.grid_axis < 3:
            raise _fail(self, f"dim must be a grid axis 0, 1 or 2, got {self.grid_axis}")
        kernel = kernel_of(self)
        if kernel is not None and kernel.grid[self.grid_axis] < 2:
            raise _fail(self, f"grid axis {self.grid_axis} has {kernel.grid[self.grid_axis]} block: nothing to sum")
        if kernel is not None and self.partner_trip_count is not None:
            self.verify_late_finisher(kernel)

    def verify_late_finisher(self, kernel: KernelOp) -> None:
        """The split ranges must be real: 1 <= E < the loop's trip count, and every loop's
        tile offset along the split axis must be whole iterations (so a split's first
        iteration is the sum of the earlier splits' counts)."""
        loops = [op for op in kernel.body.block.ops if isinstance(op, ForOp)]
        if len(loops) != 1:
            raise _fail(self, f"partner_trips needs exactly one top-level cute.for in the kernel, found {len(loops)}")
        trips, e = loops[0].trip_count, self.partner_trip_count
        assert e is not None
        if not 1 <= e < trips:
            raise _fail(self, f"partner_trips = {e} must lie in [1, {trips}) (the for-loop's trip count)")
        copy = partial_iteration_offset(kernel, self.grid_axis, trips)
        if copy is not None:
            raise _fail(
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
    Kind `max` (group 1) with one result is the plain max (`tb.reduce_max`), then epilogue
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
        kind = self.kind.data
        if kind not in ("sum", "max"):
            raise _fail(self, f"kind '{kind}' must be sum or max")
        _check_mode(self, self.mode)
        _check_epilogue(self, self.epilogue)
        shape = _smem(self.input).get_shape()
        d, g = self.dim.value.data, self.group.value.data
        if not 0 <= d < len(shape):
            raise _fail(self, f"dim {d} is not a dimension of a rank-{len(shape)} tile")
        if g < 1 or shape[d] % g:
            raise _fail(self, f"dim {d} (size {shape[d]}) is not divisible into groups of {g}")
        expected = list(shape)
        expected[d] = g
        running = kind == "max" and len(self.outs) == 2
        if len(self.outs) != (2 if running else 1):
            raise _fail(self, f"kind '{kind}' writes 1 tile (2 for a running max), got {len(self.outs)}")
        for o in self.outs:
            if _smem(o).get_shape() != tuple(expected):
                raise _fail(self, f"result tile {_smem(o).get_shape()} must have shape {tuple(expected)}")
        if running and (g != 1 or self.mode.data != "store" or self.epilogue.data):
            raise _fail(self, "a running max reduces to size 1 and stores without an epilogue")
        if kind == "max" and g != 1:
            raise _fail(self, "a max reduces to size 1 (group 1)")
        t = self.threads.value.data
        if t < 1 or t > 32 or t & (t - 1):
            raise _fail(self, f"threads per output must be a power of two in 1..32, got {t}")
        wide = self.attributes.get(REDUCE_THREADS)
        if wide is not None and (not isinstance(wide, IntegerAttr) or wide.value.data < t or wide.value.data & (wide.value.data - 1)):
            raise _fail(self, f"{REDUCE_THREADS} must be an integer power of two of at least threads ({t})")
        _check_order(self, self.order, len(shape))


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
        _check_mode(self, self.mode)
        _check_epilogue(self, self.epilogue)
        a, b, o = (_smem(v).get_shape() for v in (self.lhs, self.rhs, self.out))
        d = self.dim.value.data
        if not (len(a) == len(b) == len(o)) or not 0 <= d < len(o):
            raise _fail(self, "operands must have one rank and dim must be one of its dims")
        expected = list(a)
        expected[d] = a[d] + b[d]
        if any(x != y for i, (x, y) in enumerate(zip(a, b)) if i != d) or tuple(expected) != o:
            raise _fail(self, f"concat of {a} and {b} along {d} does not give {o}")
        _check_order(self, self.order, len(o))


KSLICES = "cute.kslices"
"""`i64` on a `cute.mma_init` (written by cute-slice-mma): the accumulator's K is sliced over
this many warp groups (> 1), which meet in its scratch at `KSLICE_OFFSET`."""
KSLICE_OFFSET = "cute.kslice_offset"
"""`i64` on a sliced `cute.mma_init`: byte offset of its partial-sum scratch from the dynamic
shared-memory base (inside the kernel's `KSLICE_SCRATCH`)."""


@irdl_op_definition
class MmaInitOp(CuteOp):
    """A zeroed register accumulator for a tiled MMA.  `{cute.kslices, cute.kslice_offset}`:
    sliced K (see `KSLICES`)."""

    name = "cute.mma_init"
    result = result_def(FragmentType)
    assembly_format = "attr-dict `:` type($result)"

    def __init__(self, typ: FragmentType):
        super().__init__(result_types=[typ])


def _matmul_dims(op: IRDLOperation, a: SSAValue, b: SSAValue) -> tuple[int, int, int]:
    sa, sb = _smem(a).get_shape(), _smem(b).get_shape()
    if len(sa) < 2 or len(sb) < 2 or any(d != 1 for d in (*sa[:-2], *sb[:-2])):
        raise _fail(op, f"operands {sa} and {sb} must be matrices (every leading dim 1)")
    if sa[-1] != sb[-2]:
        raise _fail(op, f"contraction dims differ: {sa[-1]} vs {sb[-2]}")
    return sa[-2], sb[-1], sa[-1]


@irdl_op_definition
class MmaOp(CuteOp):
    """`acc += A @ B` over the whole K of the tiles (zero-padding non-divisible M/N/K)."""

    name = "cute.mma"
    acc = operand_def(FragmentType)
    a = operand_def(SmemTensorType)
    b = operand_def(SmemTensorType)
    assembly_format = "$acc `,` $a `,` $b attr-dict `:` type($acc) `,` type($a) `,` type($b)"

    def __init__(self, acc: SSAValue, a: SSAValue, b: SSAValue):
        super().__init__(operands=[acc, a, b])

    def verify_(self) -> None:
        m, n, _ = _matmul_dims(self, self.a, self.b)
        frag = self.acc.type
        assert isinstance(frag, FragmentType)
        if frag.get_shape() != (m, n):
            raise _fail(self, f"accumulator {frag.get_shape()} does not match the product shape {(m, n)}")
        atom = frag.mma.atom_name
        ta, tb_ = _smem(self.a).element_type, _smem(self.b).element_type
        if atom != "UniversalFMA":
            want = "bf16" if "BF16" in atom else "f16"
            if str(ta) != want or str(tb_) != want:
                raise _fail(self, f"atom {atom} needs {want} operands, got {ta} and {tb_}")


@irdl_op_definition
class MmaChainOp(CuteOp):
    """`acc += round(epilogue(A @ B)) @ C` and `sum += round(epilogue(A @ B))`, the product
    `P = A @ B` never leaving registers (FlashAttention-2's fused softmax numerator: scores,
    exp, row-sum partials and P @ V in one op).  `round` = to the element type of A (what a
    shared P tile would hold).

    A (M x K1), B (K1 x N1), C (N1 x D) are shared tiles; `sum` (M x N1) carries the tiled
    MMA of the first product, thr_layout (TGM, W) over the block's TGM x W warps: warp
    (wm, wn) takes the 16 rows of block wm and the atom blocks wn, wn + W, ... of P; `acc`
    (M x D) has thr_layout (TGM, 1): the W warps of a row block split the second product's
    K (= N1) and sum their slices when `acc` is stored (sliced K).  Rules: 16x8x16 atoms of
    one element type, one 16-row block per warp row (M <= 16 TGM), N1 a multiple of 16 W
    (two atom blocks per k16 step), the block has exactly TGM x W warps."""

    name = "cute.mma_chain"
    acc = operand_def(FragmentType)
    sum = operand_def(FragmentType)
    a = operand_def(SmemTensorType)
    b = operand_def(SmemTensorType)
    c = operand_def(SmemTensorType)
    epilogue = prop_def(ArrayAttr)
    assembly_format = (
        "$acc `,` $sum `,` $a `,` $b `,` $c $epilogue attr-dict `:` type($acc) `,` type($sum) `,` type($a) `,` "
        "type($b) `,` type($c)"
    )

    def __init__(self, acc: SSAValue, sum: SSAValue, a: SSAValue, b: SSAValue, c: SSAValue, epilogue: Sequence[UnaryFnAttr]):
        super().__init__(operands=[acc, sum, a, b, c], properties={"epilogue": ArrayAttr(epilogue)})

    def verify_(self) -> None:
        _check_epilogue(self, self.epilogue)
        m, n1, _ = _matmul_dims(self, self.a, self.b)
        c_shape = _smem(self.c).get_shape()
        if len(c_shape) < 2 or any(d != 1 for d in c_shape[:-2]) or c_shape[-2] != n1:
            raise _fail(self, f"C {c_shape} must be a matrix with {n1} rows (the columns of A @ B)")
        d = c_shape[-1]
        acc, total = self.acc.type, self.sum.type
        assert isinstance(acc, FragmentType) and isinstance(total, FragmentType)
        if total.get_shape() != (m, n1) or acc.get_shape() != (m, d):
            raise _fail(self, f"sum {total.get_shape()} / acc {acc.get_shape()} must be {(m, n1)} / {(m, d)}")
        types = {str(_smem(v).element_type) for v in (self.a, self.b, self.c)}
        if len(types) != 1:
            raise _fail(self, f"A, B and C must share one 16-bit element type, got {sorted(types)}")
        for frag in (acc, total):
            if frag.mma.atom_shape != (16, 8, 16):
                raise _fail(self, f"{frag.mma.atom_name}: a 16x8x16 atom is needed")
            want = "bf16" if "BF16" in frag.mma.atom_name else "f16"
            if types != {want}:
                raise _fail(self, f"atom {frag.mma.atom_name} needs {want} tiles")
        tgm, key_groups = total.mma.tg
        if acc.mma.tg != (tgm, 1):
            raise _fail(self, f"acc needs thr_layout ({tgm}, 1), the rows of sum's ({tgm}, {key_groups})")
        if m > 16 * tgm:
            raise _fail(self, f"A has {m} rows; at most 16 per warp row ({16 * tgm}) are supported")
        if n1 % (16 * key_groups):
            raise _fail(
                self,
                f"N1 = {n1} must be a multiple of 16 x {key_groups} key groups (two atom blocks per warp and k16 step)",
            )
        kernel = self.parent_op()
        while kernel is not None and not isinstance(kernel, KernelOp):
            kernel = kernel.parent_op()
        if kernel is not None and kernel.num_threads != 32 * tgm * key_groups:
            raise _fail(
                self,
                f"the block must have exactly {tgm * key_groups} warps (thr_layout of sum), has {kernel.num_threads} threads",
            )


@irdl_op_definition
class FragStoreOp(CuteOp):
    """Write an accumulator fragment into a tile: `out (=|+=) epilogue(acc)`."""

    name = "cute.frag_store"
    acc = operand_def(FragmentType)
    out = operand_def(SmemTensorType)
    epilogue = prop_def(ArrayAttr)
    mode = prop_def(StringAttr)
    assembly_format = "$acc $epilogue $mode $out attr-dict `:` type($acc) `->` type($out)"

    def __init__(self, acc: SSAValue, out: SSAValue, epilogue: Sequence[UnaryFnAttr], mode: str):
        super().__init__(
            operands=[acc, out], properties={"epilogue": ArrayAttr(epilogue), "mode": StringAttr(mode)}
        )

    def verify_(self) -> None:
        _check_mode(self, self.mode)
        if self.mode.data == "rescale":
            raise _fail(self, "mode 'rescale' needs a scale tile; use store or add")
        _check_epilogue(self, self.epilogue)
        frag = self.acc.type
        assert isinstance(frag, FragmentType)
        shape = _smem(self.out).get_shape()
        if len(shape) < 2 or any(d != 1 for d in shape[:-2]) or tuple(shape[-2:]) != frag.get_shape():
            raise _fail(self, f"tile {shape} does not hold a {frag.get_shape()} accumulator")


# ---------------------------------------------------------------------------------------
# Control flow


@irdl_op_definition
class YieldOp(IRDLOperation):
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
        return self.upper.value.data

    @property
    def iv(self) -> SSAValue:
        return self.body.block.args[0]

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_ssa_value(self.iv)
        printer.print_string(f" = 0 to {self.trip_count} ")
        printer.print_region(self.body, print_entry_block_args=False, print_block_terminators=False)
        printer.print_op_attributes(self.attributes)

    @classmethod
    def parse(cls, parser: Parser) -> ForOp:
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
        if self.trip_count < 1:
            raise _fail(self, f"trip count must be >= 1, got {self.trip_count}")
        args = self.body.block.args
        if len(args) != 1 or not isinstance(args[0].type, IndexType):
            raise _fail(self, "the body takes exactly one index argument (the iteration)")


Cute = Dialect(
    "cute",
    [
        KernelOp,
        SmemAllocOp,
        CopyG2SOp,
        CopyS2GOp,
        CpAsyncCommitOp,
        CpAsyncWaitOp,
        BarrierOp,
        FillOp,
        ElementwiseOp,
        ReduceOp,
        GridSumOp,
        ConcatOp,
        MmaInitOp,
        MmaOp,
        MmaChainOp,
        FragStoreOp,
        ForOp,
        YieldOp,
        HopperGemmOp,
    ],
    [LayoutAttr, SwizzleAttr, SmemTensorType, TiledMmaAttr, FragmentType, UnaryFnAttr],
)
