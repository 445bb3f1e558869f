"""`cute` shared-memory ops: tile allocation (`cute.smem_alloc`), the copies between global
and shared memory (`cute.copy_g2s`, `cute.copy_s2g`), cp.async groups and barriers, and the
byte ranges of tiles (`tile_byte_range`, `disjoint_tiles`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from xdsl.dialects.builtin import DenseArrayBase, IndexType, IntegerAttr, StringAttr, TensorType, i64
from xdsl.ir import Attribute, SSAValue
from xdsl.irdl import irdl_op_definition, operand_def, opt_operand_def, opt_prop_def, prop_def, result_def
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from mirage_xdsl.dialects.cute.attrs import (
    COPY_MODES_G2S,
    COPY_MODES_S2G,
    MAX_STAGES,
    LayoutAttr,
    SmemTensorType,
    dense,
    dense_ints,
    rule_error,
)
from mirage_xdsl.dialects.cute.kernel import CuteOp, kernel_of, smem_type


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
        """The byte offsets of the tile's buffers in the kernel's shared memory (one, or the N stage buffers of a ring)."""
        return dense_ints(self.offsets)

    @property
    def num_buffers(self) -> int:
        """Number of buffers (1, or the ring's stage count)."""
        return len(self.byte_offsets)

    def print(self, printer: Printer) -> None:
        """Print ` [off0, off1, ...] {attrs} : <tile type>`."""
        printer.print_string(" [" + ", ".join(str(o) for o in self.byte_offsets) + "]")
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.result.type)

    @classmethod
    def parse(cls, parser: Parser) -> SmemAllocOp:
        """Parse `[off0, ...] {attrs} : <tile type>`.

        Raises:
            ParseError: malformed text.
        """
        offsets = parser.parse_comma_separated_list(
            parser.Delimiter.SQUARE, lambda: parser.parse_integer(allow_boolean=False)
        )
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        typ = parser.parse_type()
        op = cls.create(result_types=[typ], properties={"offsets": dense(offsets)}, attributes=attrs)
        return op

    def verify_(self) -> None:
        """Check the buffers' offsets against the tile size and the kernel's shared memory.

        Raises:
            CuteVerifyError: not 1..MAX_STAGES offsets, an offset that is negative or not a multiple
                of 16 bytes, stage buffers that overlap (tile size = cosize x element bytes), or a
                buffer past the kernel's `smem_size`.
        """
        offs = self.byte_offsets
        if not 1 <= len(offs) <= MAX_STAGES:
            raise rule_error(self, f"needs one offset (or 2..{MAX_STAGES} for the stage buffers of a pipelined tile)")
        typ = smem_type(self.result)
        elem = _elem_bytes(typ.element_type)
        size = typ.cosize() * elem
        for off in offs:
            if off < 0 or off % 16:
                raise rule_error(self, f"offset {off} must be a non-negative multiple of 16 bytes")
        ranked = sorted(offs)
        for lo, hi in zip(ranked, ranked[1:]):
            if lo + size > hi:
                raise rule_error(self, f"stage buffers at {lo} and {hi} overlap ({size} B each)")
        kernel = kernel_of(self)
        if kernel is not None:
            for off in offs:
                if off + size > kernel.smem_bytes:
                    raise rule_error(
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
    view_offset = opt_prop_def(IntegerAttr)
    """Elements from the DTensor's start to its view's first element (a `tb.input` /
    `tb.output` view, dialects/views.py); absent = 0."""

    @property
    def view_elems(self) -> int:
        """`view_offset` in elements (0 without a view)."""
        return self.view_offset.value.data if self.view_offset is not None else 0

    def _check_common(self, gmem: SSAValue, smem: SmemTensorType, modes: Sequence[str]) -> None:
        if self.mode.data not in modes:
            raise rule_error(self, f"mode '{self.mode.data}' must be one of {', '.join(modes)}")
        if self.tile.dims != smem.get_shape():
            raise rule_error(self, f"tile shape {self.tile.dims} differs from the shared tile {smem.get_shape()}")
        gtype = gmem.type
        assert isinstance(gtype, TensorType)
        if len(gtype.get_shape()) != len(self.tile.dims):
            raise rule_error(self, "the tile and the DTensor differ in rank")
        if len(dense_ints(self.block_offset)) != 3:
            raise rule_error(self, "block_offset needs 3 entries (elements per blockIdx.x, .y, .z)")
        vec = self.vec.value.data
        if vec < 1:
            raise rule_error(self, f"vec must be >= 1, got {vec}")
        if self.mode.data != "sync":
            ebytes = _elem_bytes(gtype.element_type)
            if vec * ebytes != 16:
                raise rule_error(self, f"a {self.mode.data} copy moves 16-byte vectors: vec must be {16 // ebytes}")
            inner = [d for d, s in enumerate(self.tile.strides) if s == 1 and self.tile.dims[d] > 1]
            if len(inner) != 1 or self.tile.dims[inner[0]] % vec:
                raise rule_error(self, "a chunked copy needs one unit-stride dim whose size is a multiple of vec")
            if any(s % vec for d, s in enumerate(self.tile.strides) if d != inner[0] and self.tile.dims[d] > 1):
                raise rule_error(self, "a chunked copy needs every other DTensor stride to be a multiple of vec")
            if any(o % vec for o in dense_ints(self.block_offset)):
                raise rule_error(self, "a chunked copy needs block offsets that are multiples of vec")
            if self.view_elems % vec:
                raise rule_error(self, "a chunked copy needs a view_offset that is a multiple of vec")
        if self.view_elems < 0:
            raise rule_error(self, f"view_offset must be non-negative, got {self.view_elems}")


L2_EVICT_FIRST = "cute.l2_evict_first"
"""Unit attribute on a `cute.copy_g2s` (cp.async mode): load with an L2 evict_first policy,
for a stream each launch reads once (a kn.weight), so it does not displace lines that other
blocks read again (set by cute-late-finisher)."""


@irdl_op_definition
class CopyG2SOp(_CopyBase):
    """Load one tile of DTensor `src` into `dst`.  The tile of block (x, y, z) in iteration
    `it` starts at element `view_offset + x*bo[0] + y*bo[1] + z*bo[2] + (it + iter_offset)*iter_stride`;
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
        view_offset: int = 0,
    ):
        props: dict[str, Attribute] = {
            "mode": StringAttr(mode),
            "tile": tile,
            "block_offset": dense(block_offset),
            "vec": IntegerAttr(vec, i64),
            "iter_stride": IntegerAttr(iter_stride, i64),
            "iter_offset": IntegerAttr(iter_offset, i64),
        }
        if view_offset:
            props["view_offset"] = IntegerAttr(view_offset, i64)
        super().__init__(operands=[src, dst, [iter] if iter is not None else []], properties=props)

    def verify_(self) -> None:
        """Check the common copy rules (`_check_common`) and those of a load.

        Raises:
            CuteVerifyError: a mode outside `COPY_MODES_G2S`, a tile shape or rank mismatch, a bad
                `block_offset`, `vec` or `view_offset`, chunked/async copies that are not 16-byte vectors along one
                unit-stride dim, a DTensor and tile of different element types, a negative
                `iter_offset`, or an async copy whose iteration stride is not a multiple of `vec`.
        """
        smem = smem_type(self.dst)
        self._check_common(self.src, smem, COPY_MODES_G2S)
        src_type = self.src.type
        assert isinstance(src_type, TensorType)
        if src_type.element_type != smem.element_type:
            raise rule_error(self, "a load keeps the element type: the DTensor and the shared tile must agree")
        if self.iter_offset.value.data < 0:
            raise rule_error(self, "iter_offset must be non-negative")
        if self.mode.data == "async" and self.iter_stride.value.data and self.vec.value.data and (
            self.iter_stride.value.data % self.vec.value.data
        ):
            raise rule_error(self, "an async copy needs an iteration stride that is a multiple of vec")


@irdl_op_definition
class CopyS2GOp(_CopyBase):
    """Store tile `src` into DTensor `dst` at element `view_offset + x*bo[0] + y*bo[1] + z*bo[2]`
    (converting from fp32 when `src` is an accumulator)."""

    name = "cute.copy_s2g"
    src = operand_def(SmemTensorType)
    dst = operand_def(TensorType)
    assembly_format = "$mode $src `->` $dst attr-dict `:` type($src) `->` type($dst)"

    def __init__(
        self, mode: str, src: SSAValue, dst: SSAValue, tile: LayoutAttr, block_offset: Sequence[int], vec: int, view_offset: int = 0
    ):
        props: dict[str, Attribute] = {
            "mode": StringAttr(mode),
            "tile": tile,
            "block_offset": dense(block_offset),
            "vec": IntegerAttr(vec, i64),
        }
        if view_offset:
            props["view_offset"] = IntegerAttr(view_offset, i64)
        super().__init__(operands=[src, dst], properties=props)

    def verify_(self) -> None:
        """Check the common copy rules (`_check_common`) with the store modes.

        Raises:
            CuteVerifyError: a mode outside `COPY_MODES_S2G`, a tile shape or rank mismatch, a bad
                `block_offset`, `vec` or `view_offset`, or a chunked copy that is not 16-byte vectors along one
                unit-stride dim.
        """
        self._check_common(self.dst, smem_type(self.src), COPY_MODES_S2G)


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
        """Print ` N {attrs}`."""
        printer.print_string(f" {self.pending.value.data}")
        printer.print_op_attributes(self.attributes)

    @classmethod
    def parse(cls, parser: Parser) -> CpAsyncWaitOp:
        """Parse `N {attrs}`.

        Raises:
            ParseError: malformed text.
        """
        pending = parser.parse_integer(allow_boolean=False)
        attrs = parser.parse_optional_attr_dict()
        return cls.create(properties={"pending": IntegerAttr(pending, i64)}, attributes=attrs)

    def verify_(self) -> None:
        """Check the pending-group count.

        Raises:
            CuteVerifyError: `pending` outside 0..7 (the most groups the printer's cp.async pipelines
                keep in flight, `MAX_STAGES` - 1).
        """
        if not 0 <= self.pending.value.data <= 7:
            raise rule_error(self, "pending must be in 0..7")


@irdl_op_definition
class BarrierOp(CuteOp):
    """`__syncthreads()`."""

    name = "cute.barrier"
    assembly_format = "attr-dict"
