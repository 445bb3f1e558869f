"""`cute.hopper_gemm`: one sm_90a warp-specialised GEMM kernel (TMA + wgmma), as a launch.

    %out = cute.hopper_gemm(%a, %b) {kernel_name = "contract_0",
        gemm = array<i64: 4096, 4096, 4096, 4, 1>,            // m, n, k, batch_inner, batch_outer
        a_strides = array<i64: 4096, 16777216, 0>,            // m, c_inner, c_outer (k stride 1)
        b_strides = array<i64: 4096, 1, 16777216, 0>,         // k, n, c_inner, c_outer
        out_strides = array<i64: 4096, 16777216, 0>,          // m, c_inner, c_outer (n stride 1)
        tile = array<i64: 128, 256, 64>, stages = 4 : i64, consumers = 2 : i64,
        group_m = 8 : i64, grid = 132 : i64, trans_b = true, epilogue = "tma_store",
        cluster = 1 : i64}                                    // 2: B multicast to CTA pairs
                                                              // (with share_a = true: A)
        : (tensor<4x4096x4096xf16>, tensor<4x4096x4096xf16>) -> tensor<4x4096x4096xf16>

The operands are the graph's tensors (any shape: the strides above say how the GEMM walks
them, in elements).  An optional third operand `cute.hopper_gemm(%a, %b, %d)` is the
contraction's ELWISE_MUL factor: of the result's type, read with `out_strides`, multiplied
into the fp32 accumulators before the store.  An optional `activation = [#cute.fn<silu>, ...]`
applies unary functions to each fp32 accumulator first, in order: the result is
`act(A x B) [* D]` (kn-partition's epilogue chains, passes/conversion/gemm_epilogue.py).
`split_k = S` (S > 1) cuts each tile's K range into S work units that add their fp32 partial
tiles through `S x tiles x BM x BN x 4` bytes of the graph's workspace at `scratch_offset`
and one arrival counter per tile and consumer (the runtime's zeroed counter buffer); the
last unit of a tile runs the epilogue.  `stream_k = P` instead (stream-K: no cluster, split
or ping-pong) cuts the tiles x k-tiles iterations into `grid` equal contiguous ranges, one per
block, so that every SM streams the same share however the tiles divide the SMs; the blocks
sharing a tile add their partials through `P x tiles x BM x BN x 4` workspace bytes (P >=
`stream_slabs`, the most blocks one tile can be shared by) and the same counters.  `pingpong = true` (two consumers, no
split, BN <= 128) gives each consumer warpgroup whole BM x BN tiles in turn instead of one
64-row slab of every tile, so one consumer's epilogue overlaps the other's mainloop
(CUTLASS's ping-pong schedule).  `mul_tma = true` (a factor, `tma_store`, no split or stream-K)
loads the ELWISE_MUL factor by TMA into the staging tiles instead of reading it from global
memory in the epilogue.  `share_a = true` (cluster = 2, an even n-block count) pairs
neighbouring n-blocks of one m-block, which share the A tile by multicast instead of B.
Every decision is an attribute set by `convert-contraction-to-hopper`
(passes/contraction/to_hopper.py); the CUDA printer (codegen/hopper_gemm.py) prints a call
of `mx::hopper::gemm_ws` (codegen/include/mirage_xdsl/hopper_gemm.cuh) instantiated with
them.  Tile rules of that header: BM = 64 * consumers, BK = 64, BN in {64, 128, 192, 256};
a cooperative tile (no ping-pong, split or stream-K) of BN <= 128 may also be BM = 128 *
consumers, each consumer owning two m64 slabs (`m_slabs`; e.g. 256 x 128 tiles).
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import ArrayAttr, BoolAttr, DenseArrayBase, IntegerAttr, StringAttr, TensorType, i64
from xdsl.ir import Attribute, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    ParsePropInAttrDict,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    prop_def,
    result_def,
)
from xdsl.utils.exceptions import VerifyException

from mirage_xdsl.dialects.cute.attrs import UnaryFnAttr

BK = 64
"""K extent of one pipeline stage: 64 fp16/bf16 elements = one 128-byte swizzle row."""
TILE_N = (64, 128, 192, 256)
"""wgmma N extents the header instantiates."""
EPILOGUES = {"store4": 0, "store16": 1, "tma_store": 2}
"""`epilogue` -> the header's `Epilogue` value: 4-byte stores, 16-byte stores (n, ldc and the
batch strides multiples of 8), or a swizzled staging tile stored by TMA (same rule)."""


def stream_slabs(tiles: int, ktiles: int, grid: int) -> int:
    """The most blocks of a stream-K sweep that can share one tile (0: a block would get no
    k-tile): `grid` blocks take equal ranges (at least floor(total / grid) k-iterations each) of
    the tiles x `ktiles` iterations, so `ktiles` consecutive iterations meet at most
    ceil(ktiles / floor(total / grid)) + 1 of them (codegen/include/mirage_xdsl/hopper_gemm.cuh,
    STREAM)."""
    per = tiles * ktiles // grid
    return -(-ktiles // per) + 1 if per > 0 else 0


def _ints(values: Sequence[int]) -> DenseArrayBase:
    return DenseArrayBase.from_list(i64, list(values))


def _int(value: int) -> IntegerAttr:
    return IntegerAttr(value, i64)


@irdl_op_definition
class HopperGemmOp(IRDLOperation):
    """A batched GEMM over strided operands on sm_90a (see the module docstring)."""

    name = "cute.hopper_gemm"
    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    mul = opt_operand_def(TensorType)
    result = result_def(TensorType)
    kernel_name = prop_def(StringAttr)
    gemm = prop_def(DenseArrayBase)
    a_strides = prop_def(DenseArrayBase)
    b_strides = prop_def(DenseArrayBase)
    out_strides = prop_def(DenseArrayBase)
    tile = prop_def(DenseArrayBase)
    stages = prop_def(IntegerAttr)
    consumers = prop_def(IntegerAttr)
    group_m = prop_def(IntegerAttr)
    grid = prop_def(IntegerAttr)
    trans_b = prop_def(BoolAttr)
    epilogue = prop_def(StringAttr)
    cluster = prop_def(IntegerAttr)
    activation = opt_prop_def(ArrayAttr[UnaryFnAttr])
    split_k = opt_prop_def(IntegerAttr)
    scratch_offset = opt_prop_def(IntegerAttr)
    pingpong = opt_prop_def(BoolAttr)
    stream_k = opt_prop_def(IntegerAttr)
    mul_tma = opt_prop_def(BoolAttr)
    share_a = opt_prop_def(BoolAttr)

    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "`(` $lhs `,` $rhs (`,` $mul^)? `)` attr-dict `:` functional-type(operands, results)"

    def __init__(
        self,
        lhs: SSAValue,
        rhs: SSAValue,
        result_type: Attribute,
        *,
        kernel_name: str,
        gemm: Sequence[int],
        a_strides: Sequence[int],
        b_strides: Sequence[int],
        out_strides: Sequence[int],
        tile: Sequence[int],
        stages: int,
        consumers: int,
        group_m: int,
        grid: int,
        trans_b: bool,
        epilogue: str,
        cluster: int = 1,
        mul: SSAValue | None = None,
        activation: Sequence[UnaryFnAttr] = (),
        split_k: int = 1,
        scratch_offset: int = 0,
        pingpong: bool = False,
        stream_k: int = 0,
        mul_tma: bool = False,
        share_a: bool = False,
    ):
        extra: dict[str, Attribute] = {"activation": ArrayAttr(activation)} if activation else {}
        if split_k > 1:
            extra |= {"split_k": _int(split_k), "scratch_offset": _int(scratch_offset)}
        if stream_k > 0:
            extra |= {"stream_k": _int(stream_k), "scratch_offset": _int(scratch_offset)}
        if pingpong:
            extra["pingpong"] = BoolAttr.from_bool(True)
        if mul_tma:
            extra["mul_tma"] = BoolAttr.from_bool(True)
        if share_a:
            extra["share_a"] = BoolAttr.from_bool(True)
        super().__init__(
            operands=[lhs, rhs, [mul] if mul is not None else []],
            result_types=[result_type],
            properties={
                "kernel_name": StringAttr(kernel_name),
                "gemm": _ints(gemm),
                "a_strides": _ints(a_strides),
                "b_strides": _ints(b_strides),
                "out_strides": _ints(out_strides),
                "tile": _ints(tile),
                "stages": _int(stages),
                "consumers": _int(consumers),
                "group_m": _int(group_m),
                "grid": _int(grid),
                "trans_b": BoolAttr.from_bool(trans_b),
                "epilogue": StringAttr(epilogue),
                "cluster": _int(cluster),
                **extra,
            },
        )

    @property
    def m_slabs(self) -> int:
        """m64 slabs each consumer of a cooperative tile owns: BM / (64 x consumers), 1 or 2
        (ping-pong consumers own the whole tile; the header's `CSLABS`)."""
        return 1 if self.is_pingpong else self.ints("tile")[0] // (64 * self.consumers.value.data)

    @property
    def is_pingpong(self) -> bool:
        """Whether the consumers take whole tiles in turn (the ping-pong schedule)."""
        return self.pingpong is not None and bool(self.pingpong.value.data)

    @property
    def splits(self) -> int:
        """K splits of each tile (1: none)."""
        return self.split_k.value.data if self.split_k is not None else 1

    @property
    def stream_slots(self) -> int:
        """Partial slabs per tile of a stream-K sweep (0: not stream-K)."""
        return self.stream_k.value.data if self.stream_k is not None else 0

    @property
    def shares_tiles(self) -> bool:
        """Whether blocks add partial tiles through the workspace (split-K or stream-K)."""
        return self.splits > 1 or self.stream_slots > 0

    @property
    def mul_by_tma(self) -> bool:
        """Whether the ELWISE_MUL factor comes by TMA into the staging tiles (`mul_tma = true`;
        hopper_gemm.cuh MUL = 2, the launch then carries D's tensor map)."""
        return self.mul_tma is not None and bool(self.mul_tma.value.data)

    @property
    def shares_a(self) -> bool:
        """Whether a CTA pair takes neighbouring n-blocks of one m-block and shares the A tile by
        multicast (`share_a = true`; hopper_gemm.cuh SHARE_A) instead of the B tile."""
        return self.share_a is not None and bool(self.share_a.value.data)

    def tiles(self) -> int:
        """Output tiles of the GEMM: m-blocks x n-blocks x batches."""
        m, n, _, b_in, b_out = self.ints("gemm")
        bm, bn, _ = self.ints("tile")
        return -(-m // bm) * -(-n // bn) * b_in * b_out

    def scratch_bytes(self) -> int:
        """Workspace bytes of the split-K / stream-K partial tiles (0 without either)."""
        bm, bn, _ = self.ints("tile")
        slabs = self.stream_slots or (self.splits if self.splits > 1 else 0)
        return slabs * self.tiles() * bm * bn * 4

    def counter_words(self) -> int:
        """32-bit arrival counters of the shared tiles (one per tile and consumer; 0 without split- or stream-K)."""
        return self.tiles() * self.consumers.value.data if self.shares_tiles else 0

    @property
    def activation_fns(self) -> list[UnaryFnAttr]:
        """The unary functions the epilogue applies to each accumulator, in order (may be empty)."""
        return list(self.activation.data) if self.activation is not None else []

    def ints(self, name: str) -> list[int]:
        """The values of an `array<i64>` property (`gemm`, `tile`, `a_strides`, ...)."""
        attr = getattr(self, name)
        return [int(v) for v in attr.get_values()]

    def verify_(self) -> None:
        """Check the GEMM sizes, strides, tile, pipeline options and element types.

        The tile must be [64 x consumers, one of `TILE_N`, `BK`] as
        codegen/include/mirage_xdsl/hopper_gemm.cuh instantiates it, or [128 x consumers, <= 128,
        `BK`] for a cooperative GEMM without split- or stream-K (two m64 slabs per consumer).

        Raises:
            VerifyException: `gemm` is not 5 positive sizes, the stride arrays do not have 3/4/3
                entries, the tile or the consumers / stages / grid / cluster are out of range, the
                cluster does not divide the grid, a split_k below 1, above the k-tile count or
                with a cluster or without scratch_offset, a ping-pong schedule other than two
                consumers without cluster or split and BN <= 128, a stream_k with a split, ping-pong,
                cluster or fewer slabs than `stream_slabs`, an unknown epilogue, operands and
                result of different element types, an ELWISE_MUL factor whose type is not the result's, or
                `mul_tma` without a factor, with another epilogue or with split- or stream-K.
        """
        gemm, tile = self.ints("gemm"), self.ints("tile")
        if len(gemm) != 5 or min(gemm) < 1:
            raise VerifyException("cute.hopper_gemm: gemm must be 5 positive sizes (m, n, k, batch_inner, batch_outer)")
        if (len(self.ints("a_strides")), len(self.ints("b_strides")), len(self.ints("out_strides"))) != (3, 4, 3):
            raise VerifyException("cute.hopper_gemm: a_strides/b_strides/out_strides need 3/4/3 entries")
        consumers = self.consumers.value.data
        if len(tile) != 3 or tile[0] not in (64 * consumers, 128 * consumers) or tile[1] not in TILE_N or tile[2] != BK:
            raise VerifyException(
                f"cute.hopper_gemm: tile {tile} must be [64 * consumers (or 128 * consumers), one of {TILE_N}, {BK}] "
                "(hopper_gemm.cuh)"
            )
        if tile[0] == 128 * consumers and (tile[1] > 128 or self.is_pingpong or self.splits > 1 or self.stream_slots):
            raise VerifyException(
                f"cute.hopper_gemm: a tile of 128 rows per consumer ({tile}) needs the cooperative schedule without "
                "split_k or stream_k and a tile N of at most 128 (each consumer holds 2 x 64 x N fp32 accumulators)"
            )
        if consumers not in (1, 2) or self.stages.value.data < 2 or self.grid.value.data < 1:
            raise VerifyException("cute.hopper_gemm: consumers must be 1 or 2, stages >= 2, grid >= 1")
        if self.cluster.value.data not in (1, 2) or self.grid.value.data % self.cluster.value.data:
            raise VerifyException("cute.hopper_gemm: cluster must be 1 or 2 and divide the grid")
        if self.epilogue.data not in EPILOGUES:
            raise VerifyException(f"cute.hopper_gemm: epilogue {self.epilogue.data!r} is not one of {sorted(EPILOGUES)}")
        if self.splits < 1 or (self.splits > 1 and (self.cluster.value.data != 1 or self.scratch_offset is None)):
            raise VerifyException("cute.hopper_gemm: split_k must be >= 1; a split GEMM needs cluster = 1 and a scratch_offset")
        if self.splits > 1 and -(-gemm[2] // BK) < self.splits:
            raise VerifyException(f"cute.hopper_gemm: split_k = {self.splits} exceeds the {-(-gemm[2] // BK)} k-tiles of K = {gemm[2]}")
        if self.is_pingpong and (consumers != 2 or self.splits > 1 or tile[1] > 128):
            raise VerifyException(
                "cute.hopper_gemm: pingpong needs consumers = 2, no split_k and a tile N of at most 128 "
                f"(each consumer holds a whole 128 x N tile's fp32 accumulators), got consumers {consumers}, "
                f"split_k {self.splits}, tile {tile}"
            )
        if self.stream_slots:
            need = stream_slabs(self.tiles(), -(-gemm[2] // BK), self.grid.value.data)
            if self.splits > 1 or self.is_pingpong or self.cluster.value.data != 1 or self.scratch_offset is None:
                raise VerifyException("cute.hopper_gemm: stream_k needs no split_k, no pingpong, cluster = 1 and a scratch_offset")
            if need == 0 or self.stream_slots < need:
                raise VerifyException(
                    f"cute.hopper_gemm: stream_k = {self.stream_slots} partial slabs per tile, but {self.grid.value.data} blocks "
                    f"over {self.tiles()} tiles share a tile among up to {need or 'more k-tiles than there are'}; "
                    "use stream_slabs(tiles, k-tiles, grid)"
                )
        if self.shares_a and (self.cluster.value.data != 2 or -(-gemm[1] // tile[1]) % 2):
            raise VerifyException(
                f"cute.hopper_gemm: share_a needs cluster = 2 and an even n-block count (the pair's CTAs take n-blocks "
                f"2j and 2j + 1 of one m-block), got cluster {self.cluster.value.data} and {-(-gemm[1] // tile[1])} n-blocks"
            )
        if self.mul_by_tma and (self.mul is None or self.epilogue.data != "tma_store" or self.shares_tiles):
            raise VerifyException(
                "cute.hopper_gemm: mul_tma needs an ELWISE_MUL factor, the tma_store epilogue (its staging tiles receive "
                "the factor) and no split_k / stream_k"
            )
        if self.mul is not None and self.mul.type != self.result.type:
            raise VerifyException(f"cute.hopper_gemm: the ELWISE_MUL factor must have the result's type {self.result.type}")
        for v in (self.lhs, self.rhs, self.result):
            assert isinstance(v.type, TensorType)
            if v.type.element_type not in (self.result.type.element_type,):  # type: ignore[union-attr]
                raise VerifyException("cute.hopper_gemm: operands and result must have one element type")
