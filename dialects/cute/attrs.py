"""`cute` attributes and types: layouts, swizzles, shared-memory tiles, tiled MMAs,
register fragments and epilogue functions, with the dialect's limits, the verifier's error
(`CuteVerifyError`, messages `cute.<op>: <rule>`) and small helpers for int arrays.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from xdsl.dialects.builtin import ArrayAttr, DenseArrayBase, Float32Type, FloatAttr, IntAttr, StringAttr, f64, i64
from xdsl.ir import Attribute, ParametrizedAttribute, SSAValue, TypeAttribute
from xdsl.irdl import IRDLOperation, irdl_attr_definition
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

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
    "add_scalar": 1,
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


def rule_error(op: IRDLOperation, rule: str) -> CuteVerifyError:
    """A `CuteVerifyError` whose message is `<op name>: <rule>`."""
    return CuteVerifyError(f"{op.name}: {rule}")


def int_tuple(values: ArrayAttr[IntAttr]) -> tuple[int, ...]:
    """The Python ints of an `ArrayAttr` of `IntAttr`."""
    return tuple(v.data for v in values.data)


def _int_array(values: Sequence[int]) -> ArrayAttr[IntAttr]:
    return ArrayAttr(IntAttr(int(v)) for v in values)


def dense(values: Sequence[int]) -> DenseArrayBase:
    """An i64 `DenseArrayBase` of `values`."""
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
    """The Python ints of an integer `DenseArrayBase`."""
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
        """The sizes of the layout's dims, outermost first."""
        return int_tuple(self.shape)

    @property
    def strides(self) -> tuple[int, ...]:
        """The element strides of the layout's dims, outermost first."""
        return int_tuple(self.stride)

    def cosize(self) -> int:
        """1 + the largest offset the layout reaches."""
        return 1 + sum((d - 1) * s for d, s in zip(self.dims, self.strides))

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        """Parse the layout body `(shape):(strides)` inside the angle brackets.

        Raises:
            ParseError: malformed text, or shape and stride of different ranks.
        """
        with parser.in_angle_brackets():
            return _parse_layout_body(parser)

    def print_parameters(self, printer: Printer) -> None:
        """Print `<(shape):(strides)>`."""
        printer.print_string(f"<{self.text()}>")

    def text(self) -> str:
        """The layout as `(shape):(strides)`, e.g. `(2,128):(128,1)`."""
        return f"{_fmt_tuple(self.dims)}:{_fmt_tuple(self.strides)}"

    def verify(self) -> None:
        """Check the layout.

        Raises:
            VerifyException: shape and stride differ in rank, the rank is not 1..MAX_RANK, a size is
                < 1 or a stride is negative.
        """
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
        """CuTe `Swizzle<b, m, s>` (the XOR swizzle on element offsets)."""
        return SwizzleAttr("xor", (b, m, s))

    @staticmethod
    def none() -> SwizzleAttr:
        """No swizzle."""
        return SwizzleAttr("none")

    @property
    def is_xor(self) -> bool:
        """Whether this is an XOR swizzle."""
        return self.kind.data == "xor"

    @property
    def bms(self) -> tuple[int, int, int]:
        """The (B, M, S) parameters (zeros unless XOR)."""
        b, m, s = int_tuple(self.bits)
        return b, m, s

    def text(self) -> str:
        """`xor<B,M,S>`, `shift` or `none`."""
        if self.is_xor:
            return "xor<{},{},{}>".format(*self.bms)
        return self.kind.data

    def apply(self, offset: int) -> int:
        """The swizzled element offset: `offset ^ ((offset >> S) & (((1 << B) - 1) << M))` for XOR
        (CuTe's `Swizzle<B,M,S>`, cute/swizzle.hpp), else `offset` unchanged (shift swizzles live in
        the strides).
        """
        if not self.is_xor:
            return offset
        b, m, s = self.bms
        return offset ^ ((offset >> s) & (((1 << b) - 1) << m))

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        """Parse `<B,M,S>`, `<xor<B,M,S>>`, `<shift>` or `<none>`.

        Raises:
            ParseError: any other text.
        """
        with parser.in_angle_brackets():
            return _parse_swizzle_body(parser, bare=True)

    def print_parameters(self, printer: Printer) -> None:
        """Print `<B,M,S>` for XOR, else `<shift>` / `<none>`."""
        if self.is_xor:
            printer.print_string("<{},{},{}>".format(*self.bms))
        else:
            printer.print_string(f"<{self.kind.data}>")

    def verify(self) -> None:
        """Check the swizzle.

        Raises:
            VerifyException: a kind other than xor / shift / none, not three parameters, or an XOR
                swizzle without B >= 1, M >= 0 and S >= B.
        """
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
        """The tile's shape (its layout's dims)."""
        return self.layout.dims

    def get_element_type(self) -> Attribute:
        """The tile's element type."""
        return self.element_type

    @property
    def strides(self) -> tuple[int, ...]:
        """The tile's element strides (its layout's strides)."""
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
        """Parse `<elem, (shape):(strides)[, swizzle]>` (no swizzle: `none`).

        Raises:
            ParseError: malformed text.
        """
        with parser.in_angle_brackets():
            element_type = parser.parse_type()
            parser.parse_punctuation(",")
            shape, stride = _parse_layout_body(parser)
            swizzle = (StringAttr("none"), _int_array((0, 0, 0)))
            if parser.parse_optional_punctuation(","):
                swizzle = _parse_swizzle_body(parser, bare=False)
        return (element_type, LayoutAttr.new((shape, stride)), SwizzleAttr.new(swizzle))

    def print_parameters(self, printer: Printer) -> None:
        """Print `<elem, (shape):(strides)[, swizzle]>`, the swizzle only when it is not `none`."""
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
        """The MMA atom's name (one of `MMA_ATOMS`)."""
        return self.atom.data

    @property
    def tg(self) -> tuple[int, int]:
        """The warp layout (tg_m, tg_n); (threads, 1) for `UniversalFMA`."""
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
        """Parse `<atom, (tg_m,tg_n)>`.

        Raises:
            ParseError: malformed text.
        """
        with parser.in_angle_brackets():
            atom = parser.parse_identifier()
            parser.parse_punctuation(",")
            tg = _parse_int_tuple(parser)
        return (StringAttr(atom), _int_array(tg))

    def print_parameters(self, printer: Printer) -> None:
        """Print `<atom, (tg_m,tg_n)>`."""
        printer.print_string(f"<{self.atom_name}, {_fmt_tuple(self.tg)}>")

    def verify(self) -> None:
        """Check the tiled MMA.

        Raises:
            VerifyException: the warp layout is not two positive sizes, or the atom is not in `MMA_ATOMS`.
        """
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
        """The fragment's (M, N) shape."""
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
        """Parse `<MxNxf32, #cute.tiled_mma<...>>`.

        Raises:
            ParseError: malformed text.
        """
        with parser.in_angle_brackets():
            dims, element_type = parser.parse_ranked_shape()
            parser.parse_punctuation(",")
            mma = parser.parse_attribute()
        return (_int_array(dims), element_type, mma)

    def print_parameters(self, printer: Printer) -> None:
        """Print `<MxNxf32, #cute.tiled_mma<...>>`."""
        printer.print_string("<" + "x".join(str(d) for d in self.get_shape()) + "x")
        printer.print_attribute(self.element_type)
        printer.print_string(", ")
        printer.print_attribute(self.mma)
        printer.print_string(">")

    def verify(self) -> None:
        """Check the fragment.

        Raises:
            VerifyException: the shape is not two positive sizes, the element type is not f32, or the
                third parameter is not a `TiledMmaAttr`.
        """
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
        """The function's name (a key of `UNARY_FNS`)."""
        return self.fn.data

    @property
    def values(self) -> tuple[float, ...]:
        """The function's float parameters (clamp: min, max; mul_scalar, add_scalar: the scalar)."""
        return tuple(float(p.value.data) for p in self.params.data)

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        """Parse `<fn>` or `<fn(p0,p1,...)>`.

        Raises:
            ParseError: malformed text.
        """
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
        """Print `<fn>` or `<fn(p0,...)>` with floats the MLIR lexer reads back exactly.

        Raises:
            ValueError: a non-finite parameter (`format_float`).
        """
        text = self.fn_name
        if self.params.data:
            text += "(" + ",".join(format_float(v) for v in self.values) + ")"
        printer.print_string(f"<{text}>")

    def verify(self) -> None:
        """Check the function.

        Raises:
            VerifyException: an unknown function, a parameter count other than `UNARY_FNS[fn]`, or
                a clamp with min > max.
        """
        fn = self.fn.data
        if fn not in UNARY_FNS:
            raise VerifyException(f"cute.fn: unknown function '{fn}' (expected one of {', '.join(UNARY_FNS)})")
        if len(self.params) != UNARY_FNS[fn]:
            raise VerifyException(f"cute.fn: '{fn}' takes {UNARY_FNS[fn]} parameters, got {len(self.params)}")
        if fn == "clamp" and self.values[0] > self.values[1]:
            raise VerifyException("cute.fn: clamp needs min <= max")
