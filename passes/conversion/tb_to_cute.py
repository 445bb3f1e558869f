"""`convert-tb-to-cute`: lower every scheduled, memory-planned `kn.customized` to a `cute.kernel`
(mirage-notes 3.8-3.9; the IR contract of passes/README.md, steps 3-10).

Input: the threadblock graph after `tb-plan-smem`, ops in execution order with `tb.chain` /
`tb.chain_pos`, `tb.stage` / `tb.level`, `tb.strides`, `tb.swizzle`, `tb.smem_offset` (and
`tb.smem_offsets_pipeline` on pipelined inputs), `tb.chunked` / `tb.pipelined` /
`tb.accum_in_reg`, `tb.iter_dim` on chain leaders, `tb.smem_size` on the customized op.
A missing attribute is a located error naming the pass that writes it.

Output (the `cute` dialect, `dialects/cute/`), one straight-line program per kernel:

    smem_alloc ...                    every materialised tile at its planned offset(s)
                                      (N stage buffers for a pipelined input)
    copy_g2s (pre-loop inputs)        sync / 16-B chunked
    fill (shared accumulators), mma_init (register accumulators)
    copy_g2s async [it k] + commit    prologue: iterations k = 0 .. N-2 of every
                                      cp.async-pipelined input, one commit group each
    barrier
    for %it = 0 to R {
      copy_g2s async [%it + N-1] ... commit, cp_async_wait N-1   (prefetch; stage (it+N-1) % N)
      copy_g2s [%it] (other iterated inputs)
      barrier / chains by level (a barrier wherever tb.level changes)
      barrier
    }
    barrier, frag_store (register accumulators), barrier
    post-loop chains and copy_s2g by level

Chains (tb-fusion-chains) become one op each: a matmul leader `mma_init` + `mma` +
`frag_store` (the unary ops as an epilogue on the fragment, a trailing `nored` as `add`),
reductions `cute.reduce`, everything else `cute.elementwise` / `cute.concat`.  Accumulator
tiles of multi-iteration graphs are fp32 (`layout_math.stores_fp32`), register fragments
always.  The MMA atom and the warp layout (tg_m, tg_n) follow Mirage's data-moved score
(mirage-notes 3.9); option `tensor_cores=false` (or non-fp16/bf16 operands) selects the
CUDA-core `UniversalFMA` fallback.  Flash decoding's loop body (`P = exp(Q @ K)`, `L += P`,
`O += P @ V`, see passes/conversion/register_chain.py) becomes one `cute.mma_chain`: P stays in
registers, L accumulates in P's fragment layout and is stored after the loop like the
register accumulators, the warps split the keys of `P @ V`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    ArrayAttr,
    BFloat16Type,
    DenseArrayBase,
    Float16Type,
    Float32Type,
    Float64Type,
    IntegerAttr,
    ModuleOp,
    StringAttr,
    UnitAttr,
)
from xdsl.ir import Attribute, Block, BlockArgument, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter
from xdsl.utils.exceptions import PassFailedException

from mirage_xdsl.dialects import cute, tb
from mirage_xdsl.dialects.kn import CustomizedOp, element_type_of, ints, shape_of
from mirage_xdsl.dialects.kn.strides import dtensor_strides
from mirage_xdsl.passes.conversion.register_chain import RegisterChain, chain_thr_layout, find_register_chains
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


def _error(op: Operation, rule: str) -> ConvertError:
    return ConvertError(op, f"{PASS_NAME}: {rule}")


# ---------------------------------------------------------------------------------------
# Kernel-level helpers (also used by the CUDA printer)




# ---------------------------------------------------------------------------------------
# MMA choice (mirage-notes 3.9)


def mma_atom_for(a_type: Attribute, b_type: Attribute, k: int) -> str | None:
    """The SM80 tensor-core atom for operand types and tile K, or None (use UniversalFMA)."""
    if isinstance(a_type, Float16Type) and isinstance(b_type, Float16Type):
        return "SM80_16x8x8_F32F16F16F32_TN" if k <= 8 else "SM80_16x8x16_F32F16F16F32_TN"
    if isinstance(a_type, BFloat16Type) and isinstance(b_type, BFloat16Type):
        return "SM80_16x8x8_F32BF16BF16F32_TN" if k <= 8 else "SM80_16x8x16_F32BF16BF16F32_TN"
    return None


def choose_thr_layout(m: int, n: int, k: int, num_threads: int) -> tuple[int, int]:
    """Mirage's warp layout: over tg_m * tg_n <= threads/32 warps (skipping layouts that do
    not tile M > 16 or N > 8 evenly), maximise (tg_m*tg_n/max) / data_moved with
    data_moved = ceil(m/16tg_m)*16tg_m*k*tg_n + ceil(n/8tg_n)*8tg_n*k*tg_m (first best wins).
    When no layout tiles evenly, the filter is dropped (the kernel masks the remainder)."""
    max_tgs = max(1, num_threads // 32)

    def best(strict: bool) -> tuple[int, int] | None:
        choice, score = None, -1.0
        for tg_m in range(1, max_tgs + 1):
            for tg_n in range(1, max_tgs // tg_m + 1):
                if strict and ((m > 16 and m % (16 * tg_m)) or (n > 8 and n % (8 * tg_n))):
                    continue
                moved = -(-m // (16 * tg_m)) * 16 * tg_m * k * tg_n + -(-n // (8 * tg_n)) * 8 * tg_n * k * tg_m
                s = (1.0 / moved) * (tg_m * tg_n / max_tgs)
                if s > score:
                    choice, score = (tg_m, tg_n), s
        return choice

    return best(True) or best(False) or (1, 1)


def choose_tiled_mma(
    m: int, n: int, k: int, num_threads: int, a_type: Attribute, b_type: Attribute, tensor_cores: bool = True
) -> cute.TiledMmaAttr:
    atom = mma_atom_for(a_type, b_type, k) if tensor_cores and num_threads >= 32 else None
    if atom is None:
        return cute.TiledMmaAttr("UniversalFMA", (num_threads, 1))
    return cute.TiledMmaAttr(atom, choose_thr_layout(m, n, k, num_threads))


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


# ---------------------------------------------------------------------------------------
# Per-kernel lowering


def _ints_of(attr: Attribute) -> tuple[int, ...]:
    assert isinstance(attr, DenseArrayBase)
    return ints(attr)


@dataclass
class _Chain:
    ops: list[Operation]
    stage: str
    level: int


class _KernelBuilder:
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

    # ---- attribute access ------------------------------------------------------------

    def attr(self, op: Operation, name: str) -> Attribute:
        value = op.attributes.get(name)
        if value is None:
            writer = WRITER.get(name, "mirage-transpile")
            raise _error(
                op,
                f"{op.name} has no '{name}' attribute; run {writer} first "
                "(mirage-transpile runs every pass in order)",
            )
        return value

    def int_attr(self, op: Operation, name: str) -> int:
        value = self.attr(op, name)
        if not isinstance(value, IntegerAttr):
            raise _error(op, f"'{name}' must be an integer attribute")
        return value.value.data

    def stage(self, op: Operation) -> str:
        value = self.attr(op, "tb.stage")
        if not isinstance(value, StringAttr) or value.data not in ("pre", "loop", "post"):
            raise _error(op, "'tb.stage' must be \"pre\", \"loop\" or \"post\"")
        return value.data

    # ---- tiles -------------------------------------------------------------------------

    @staticmethod
    def storage_type(value: SSAValue) -> Attribute:
        """fp32 for accumulator tiles of multi-iteration graphs (passes/README.md, "Storage
        precision": `layout_math.stores_fp32`), else the tile's element type."""
        return Float32Type() if stores_fp32(value) else element_type_of(value)

    def smem_type(self, op: Operation, index: int) -> cute.SmemTensorType:
        value = op.results[index]
        strides_attr = self.attr(op, "tb.strides")
        swz_attr = self.attr(op, "tb.swizzle")
        if not isinstance(strides_attr, ArrayAttr) or index >= len(strides_attr.data):
            raise _error(op, "'tb.strides' needs one array<i64> per result")
        if not isinstance(swz_attr, ArrayAttr) or index >= len(swz_attr.data):
            raise _error(op, "'tb.swizzle' needs one string per result")
        strides = _ints_of(strides_attr.data[index])
        shape = shape_of(value)
        if len(strides) != len(shape):
            raise _error(op, f"'tb.strides' {strides} does not match the rank of the tile {shape}")
        elem = self.storage_type(value)
        swz_text = swz_attr.data[index]
        assert isinstance(swz_text, StringAttr)
        try:
            swizzle = parse_swizzle(swz_text.data, cute.elem_bytes(elem))
        except ValueError as err:
            raise _error(op, str(err)) from None
        return cute.SmemTensorType(elem, cute.LayoutAttr(shape, strides), swizzle)

    def check_element_type(self, op: Operation, typ: Attribute) -> None:
        if not isinstance(typ, KERNEL_ELEMENT_TYPES):
            raise _error(op, f"element type {typ} is not supported by the CUDA backend (f16, bf16, f32, f64)")

    def alloc_tiles(self, ops: Sequence[Operation]) -> list[Operation]:
        allocs: list[Operation] = []
        for op in ops:
            if isinstance(op, tb.OutputOp) or not op.results:
                continue
            offsets = _ints_of(self.attr(op, "tb.smem_offset"))
            if len(offsets) != len(op.results):
                raise _error(op, "'tb.smem_offset' needs one offset per result")
            for i, res in enumerate(op.results):
                self.check_element_type(op, element_type_of(res))
                if offsets[i] < 0:
                    continue
                offs = [offsets[i]]
                typ = self.smem_type(op, i)
                if isinstance(op, tb.InputOp) and "tb.pipelined" in op.attributes:
                    ring = list(_ints_of(self.attr(op, "tb.smem_offsets_pipeline")))
                    if len(ring) < 2 or ring[0] != offsets[i]:
                        raise _error(
                            op, "'tb.smem_offsets_pipeline' needs >= 2 offsets, the first equal to 'tb.smem_offset'"
                        )
                    if self.async_ok(op, typ):
                        if self.num_stages and len(ring) != self.num_stages:
                            raise _error(
                                op,
                                f"pipelined inputs of one graph need the same number of stages "
                                f"({len(ring)} != {self.num_stages}); run tb-plan-pipeline and tb-plan-smem",
                            )
                        self.num_stages = len(ring)
                        offs = ring
                        self.pipelined.add(op)
                alloc = cute.SmemAllocOp(typ, offs)
                alloc.result.name_hint = f"s{len(allocs)}"
                allocs.append(alloc)
                self.smem[res] = alloc.result
        return allocs

    def tile(self, op: Operation, value: SSAValue) -> SSAValue:
        found = self.smem.get(value)
        if found is None:
            raise _error(
                op,
                f"{op.name} reads a tile that is not in shared memory (tb.smem_offset = -1 on its producer); "
                "only chain tails are materialised",
            )
        return found

    # ---- copies ------------------------------------------------------------------------

    def dtensor_arg(self, value: SSAValue) -> int:
        assert isinstance(value, BlockArgument)
        return value.index

    def gmem_vec_ok(self, tile_dims: Sequence[int], gstrides: Sequence[int], offsets: Sequence[int], elem: Attribute) -> int | None:
        """Unit-stride dim of a 16-B chunkable global tile, or None."""
        vec = 16 // cute.elem_bytes(elem)
        inner = [d for d, s in enumerate(gstrides) if s == 1 and tile_dims[d] > 1]
        if len(inner) != 1:
            return None
        di = inner[0]
        if tile_dims[di] % vec:
            return None
        if any(gstrides[d] % vec for d in range(len(tile_dims)) if d != di and tile_dims[d] > 1):
            return None
        if any(o % vec for o in offsets):
            return None
        return di

    @staticmethod
    def smem_vec_ok(typ: cute.SmemTensorType, di: int, vec: int) -> bool:
        """The 16-B vectors along dim `di` are contiguous and aligned in shared memory."""
        strides = typ.strides
        if strides[di] != 1:
            return False
        if any(strides[d] % vec for d in range(len(strides)) if d != di and typ.get_shape()[d] > 1):
            return False
        if typ.swizzle.is_xor:
            _, m, _ = typ.swizzle.bms
            if (1 << m) < vec:
                return False
        return True

    def input_geometry(self, op: tb.InputOp) -> tuple[tuple[int, ...], list[int], int]:
        src = op.dtensor
        dims = shape_of(src)
        assert isinstance(src, BlockArgument)
        gstrides = self.kernel_arg_strides[src.index + len(self.graph.outputs)]
        grid = self.graph.grid
        offsets = [0, 0, 0]
        for a, (g, m) in enumerate(zip(grid, op.imap)):
            if g > 1 and m >= 0:
                offsets[a] = (dims[m] // g) * gstrides[m]
        tile_dims = shape_of(op.result)
        step = tile_dims[op.fdim] * gstrides[op.fdim] if op.fdim >= 0 else 0
        return gstrides, offsets, step

    def async_ok(self, op: tb.InputOp, typ: cute.SmemTensorType) -> bool:
        if op.fdim < 0:
            return False
        gstrides, offsets, step = self.input_geometry(op)
        di = self.gmem_vec_ok(shape_of(op.result), gstrides, [*offsets, step], typ.element_type)
        return di is not None and self.smem_vec_ok(typ, di, 16 // cute.elem_bytes(typ.element_type))

    def lower_input(
        self, op: tb.InputOp, kargs: Sequence[SSAValue], iv: SSAValue | None, prologue: int | None
    ) -> list[Operation]:
        """The load of one input; `prologue` = k: the prologue load of iteration k of a
        pipelined input (no iteration operand)."""
        dst = self.tile(op, op.result)
        typ = dst.type
        assert isinstance(typ, cute.SmemTensorType)
        gstrides, offsets, step = self.input_geometry(op)
        tile = cute.LayoutAttr(shape_of(op.result), gstrides)
        src = kargs[len(self.graph.outputs) + self.dtensor_arg(op.dtensor)]
        vec = 16 // cute.elem_bytes(typ.element_type)
        mode = "sync"
        if op in self.pipelined:
            mode = "async"
        elif "tb.chunked" in op.attributes:
            if self.gmem_vec_ok(tile.dims, gstrides, [*offsets, step], typ.element_type) is not None:
                mode = "chunked"
        iterated = op.fdim >= 0
        return [
            cute.CopyG2SOp(
                mode,
                src,
                dst,
                tile,
                offsets,
                vec if mode != "sync" else 1,
                iter=iv if (iterated and prologue is None) else None,
                iter_stride=step,
                iter_offset=(self.num_stages - 1 if mode == "async" else 0) if prologue is None else prologue,
            )
        ]

    def lower_output(self, op: tb.OutputOp, index: int, kargs: Sequence[SSAValue]) -> list[Operation]:
        src = self.tile(op, op.input)
        dst = kargs[index]
        gstrides = self.kernel_arg_strides[index]
        tile_dims = shape_of(op.input)
        offsets = [0, 0, 0]
        for a, (g, m) in enumerate(zip(self.graph.grid, op.omap)):
            if g > 1 and m >= 0:
                offsets[a] = tile_dims[m] * gstrides[m]
        elem = element_type_of(dst)
        mode, vec = "sync", 1
        if "tb.chunked" in op.attributes and self.gmem_vec_ok(tile_dims, gstrides, offsets, elem) is not None:
            mode, vec = "chunked", 16 // cute.elem_bytes(elem)
        return [cute.CopyS2GOp(mode, src, dst, cute.LayoutAttr(tile_dims, gstrides), offsets, vec)]

    # ---- chains ------------------------------------------------------------------------

    def order_for(self, leader: Operation, rank: int, avoid: int | None = None) -> list[int]:
        """Dims fastest first: the leader's `tb.iter_dim` (else the last dim), then the others
        from the last to the first."""
        attr = leader.attributes.get("tb.iter_dim")
        first = attr.value.data if isinstance(attr, IntegerAttr) else rank - 1
        if not 0 <= first < rank or first == avoid:
            first = next((d for d in reversed(range(rank)) if d != avoid), rank - 1)
        return [first] + [d for d in reversed(range(rank)) if d != first]

    def epilogue_of(self, ops: Sequence[Operation]) -> list[cute.UnaryFnAttr]:
        fns = []
        for op in ops:
            kind = UNARY_FN.get(type(op))
            if kind is None:
                raise _error(op, f"{op.name} cannot be fused into a chain (only elementwise unary ops and a trailing nored)")
            if isinstance(op, tb.ClampOp):
                fns.append(cute.UnaryFnAttr(kind, (op.min_value.value.data, op.max_value.value.data)))
            elif isinstance(op, tb.MulScalarOp):
                fns.append(cute.UnaryFnAttr(kind, (op.scalar.value.data,)))
            else:
                fns.append(cute.UnaryFnAttr(kind))
        return fns

    def split_chain(self, chain: _Chain) -> tuple[Operation, list[cute.UnaryFnAttr], str, SSAValue]:
        """(leader, epilogue, store mode, destination tile) of a chain."""
        ops = chain.ops
        leader, tail = ops[0], ops[-1]
        body = ops[1:]
        mode = "store"
        if len(ops) > 1 and isinstance(tail, tb.ForloopAccumOp):
            if tail.accum_kind != "nored":
                raise _error(tail, f"only a nored accumulator can end a chain, got {tail.accum_kind}")
            mode = "add"
            body = ops[1:-1]
        dst = self.tile(tail, tail.results[0])
        return leader, self.epilogue_of(body), mode, dst

    def lower_chain(self, chain: _Chain, reg_accums: dict[Operation, SSAValue]) -> list[Operation]:
        ops = chain.ops
        leader = ops[0]
        if isinstance(leader, tb.MatmulOp):
            return self.lower_matmul(chain, reg_accums)
        if isinstance(leader, tb.ForloopAccumOp):
            if len(ops) != 1:
                raise _error(ops[1], "nothing can be fused after an accumulator (its result lives after the loop)")
            dst = self.tile(leader, leader.result)
            x = self.tile(leader, leader.input)
            rank = len(shape_of(leader.result))
            order = self.order_for(leader, rank)
            kind = leader.accum_kind
            if kind == "nored":
                return [cute.ElementwiseOp("id", [x], dst, [], "add", order)]
            if kind == "max":
                return [cute.ElementwiseOp("id", [x], dst, [], "max", order)]
            if kind == "nored_rescale":
                assert leader.rescale is not None
                s = self.tile(leader, leader.rescale)
                return [cute.ElementwiseOp("id", [x, s], dst, [], "rescale", order)]
            raise _error(
                leader,
                f"accumulator kind '{kind}' must be decomposed first; run tb-decompose-accumulators",
            )
        if isinstance(leader, tb.ReductionMaxOp):
            if len(ops) != 1:
                raise _error(ops[1], "nothing can be fused after tb.reduction_max (two results)")
            x = self.tile(leader, leader.input)
            outs = [self.tile(leader, leader.max), self.tile(leader, leader.diff)]
            rank = len(shape_of(leader.input))
            d = leader.reduce_dim
            shape = shape_of(leader.input)
            g = reduce_threads(cute_numel(shape_of(leader.max)), shape[d], self.nt)
            return [cute.ReduceOp("max", x, outs, d, 1, g, [], "store", self.order_for(leader, rank, avoid=d))]
        _, rest, mode, dst = self.split_chain(chain)
        rank = len(shape_of(leader.results[0]))
        if isinstance(leader, (tb.ReductionOp, tb.ReductionToDimxOp, tb.ReduceMaxOp)):
            x = self.tile(leader, leader.input)
            shape = shape_of(leader.input)
            d = leader.reduce_dim
            group = shape_of(leader.result)[d]
            g = reduce_threads(cute_numel(shape_of(leader.result)), shape[d] // group, self.nt)
            # strided groups: walking the reduced dim itself is fine (and coalesced) when group > 1
            order = self.order_for(leader, rank, avoid=d if group == 1 and rank > 1 else None)
            kind = "max" if isinstance(leader, tb.ReduceMaxOp) else "sum"
            return [cute.ReduceOp(kind, x, [dst], d, group, g, rest, mode, order)]
        order = self.order_for(leader, rank)
        if type(leader) in UNARY_FN:
            x = self.tile(leader, leader.operands[0])
            return [cute.ElementwiseOp("id", [x], dst, self.epilogue_of([leader]) + rest, mode, order)]
        if type(leader) in BINARY_FN:
            a = self.tile(leader, leader.operands[0])
            b = self.tile(leader, leader.operands[1])
            return [cute.ElementwiseOp(BINARY_FN[type(leader)], [a, b], dst, rest, mode, order)]
        if isinstance(leader, tb.ConcatOp):
            a = self.tile(leader, leader.lhs)
            b = self.tile(leader, leader.rhs)
            return [cute.ConcatOp(a, b, dst, leader.dim.value.data, rest, mode, order)]
        if isinstance(leader, tb.RmsNormOp):
            raise _error(leader, "tb.rms_norm must be decomposed first; run tb-decompose-accumulators")
        raise _error(leader, f"{leader.name} has no CuTe lowering")

    def lower_grid_sums(self, sums: Sequence[_Chain], rest: Sequence[_Chain]) -> list[Operation]:
        """Every `tb.grid_sum` of the graph as ONE `cute.grid_sum` (one synchronisation of the
        split blocks) and a barrier.  tb-schedule puts them on one post-loop level, after the
        post-loop ops that feed them (`rest` below that level) and before all others."""
        ops = [ch.ops[0] for ch in sums]
        for ch in sums:
            if len(ch.ops) != 1:
                raise _error(ch.ops[1], "an op is fused onto a tb.grid_sum; run tb-fusion-chains on this graph again")
        level = sums[0].level
        late = [ch for ch in sums if ch.level != level] + [ch for ch in rest if ch.level == level]
        if late:
            raise _error(
                late[0].ops[0],
                "tb.grid_sum ops must share one post-loop level, after the ops that feed them and before every other "
                "post-loop op; run tb-schedule",
            )
        ins = [self.tile(op, op.operands[0]) for op in ops]
        outs = [self.tile(op, op.results[0]) for op in ops]
        # one axis for all of them: the kn.customized verifier's rule
        return [cute.GridSumOp(ins, outs, ops[0].grid_axis), cute.BarrierOp()]  # type: ignore[attr-defined]

    def matmul_parts(self, chain: _Chain) -> tuple[tb.MatmulOp, cute.FragmentType]:
        mm = chain.ops[0]
        assert isinstance(mm, tb.MatmulOp)
        a, b = self.tile(mm, mm.lhs), self.tile(mm, mm.rhs)
        ta, tb_ = a.type, b.type
        assert isinstance(ta, cute.SmemTensorType) and isinstance(tb_, cute.SmemTensorType)
        m, k = ta.get_shape()[-2:]
        n = tb_.get_shape()[-1]
        mma = choose_tiled_mma(m, n, k, self.nt, ta.element_type, tb_.element_type, self.tensor_cores)
        return mm, cute.FragmentType((m, n), mma)

    def is_register_accum(self, chain: _Chain) -> bool:
        ops = chain.ops
        return (
            len(ops) == 2
            and isinstance(ops[0], tb.MatmulOp)
            and isinstance(ops[1], tb.ForloopAccumOp)
            and ops[1].accum_kind == "nored"
            and "tb.accum_in_reg" in ops[1].attributes
            and chain.stage == "loop"
        )

    def register_chains(self, chains: Sequence[_Chain]) -> list[RegisterChain]:
        """The loop's matmul -> epilogue -> matmul chains lowered to `cute.mma_chain`."""
        if not self.tensor_cores:
            return []

        loop = [ch.ops for ch in chains if ch.stage == "loop"]
        found = find_register_chains(loop, lambda op: type(op) in UNARY_FN, self.chain_mma, self.nt // 32)
        # the warps' partial P @ V meet in a scratch appended to the planned shared memory
        # (mma_store, sliced K): keep the chains whose scratch still fits the block
        room = cute.MAX_SMEM_BYTES - (self.int_attr(self.graph, "tb.smem_size") + 15) // 16 * 16
        kept = []
        for rc in found:
            scratch = self.chain_acc_type(rc).slice_scratch_bytes(self.chain_mma(rc.first_matmul).tg[1])
            if scratch <= room:
                kept.append(rc)
                room -= scratch
        return kept

    def chain_mma(self, mm: tb.MatmulOp) -> cute.TiledMmaAttr:
        """The tiled MMA of P = A @ B in a `cute.mma_chain`: one warp row per 16-row block of
        A and the remaining warps side by side along the keys (register_chain.chain_thr_layout)."""
        ta = self.tile(mm, mm.lhs).type
        assert isinstance(ta, cute.SmemTensorType)
        m, k = ta.get_shape()[-2:]
        atom = mma_atom_for(ta.element_type, element_type_of(mm.rhs), k) or "UniversalFMA"
        return cute.TiledMmaAttr(atom, chain_thr_layout(m, self.nt // 32))

    def chain_acc_type(self, rc: RegisterChain) -> cute.FragmentType:
        """The fragment of `rc`'s P @ V accumulator: the rows of P's warp layout, its key
        groups splitting K (thr_layout (TGM, 1), sliced by the printer)."""
        mma = self.chain_mma(rc.first_matmul)
        return cute.FragmentType(shape_of(rc.second_matmul.result)[-2:], cute.TiledMmaAttr(mma.atom_name, (mma.tg[0], 1)))

    def lower_register_chain(self, rc: RegisterChain, reg_accums: dict[Operation, SSAValue]) -> list[Operation]:
        first, second = rc.first_matmul, rc.second_matmul
        a, b, c = self.tile(first, first.lhs), self.tile(first, first.rhs), self.tile(second, second.rhs)
        epilogue = self.epilogue_of(rc.first[1:])
        return [cute.MmaChainOp(reg_accums[rc.second[-1]], self.chain_sums[rc], a, b, c, epilogue)]

    def lower_matmul(self, chain: _Chain, reg_accums: dict[Operation, SSAValue]) -> list[Operation]:
        mm, frag_type = self.matmul_parts(chain)
        a, b = self.tile(mm, mm.lhs), self.tile(mm, mm.rhs)
        if chain.ops[-1] in reg_accums:
            return [cute.MmaOp(reg_accums[chain.ops[-1]], a, b)]
        _, rest, mode, dst = self.split_chain(chain)
        init = cute.MmaInitOp(frag_type)
        init.result.name_hint = "acc"
        return [init, cute.MmaOp(init.result, a, b), cute.FragStoreOp(init.result, dst, rest, mode)]

    # ---- the kernel ----------------------------------------------------------------------

    def chains(self, ops: Sequence[Operation]) -> list[_Chain]:
        chains: list[_Chain] = []
        current_id: tuple[str, int] | None = None
        for op in ops:
            stage = self.stage(op)
            level = self.int_attr(op, "tb.level")
            cid = self.int_attr(op, "tb.chain")
            pos = self.int_attr(op, "tb.chain_pos")
            key = (stage, cid)
            if chains and key == current_id and pos > 0:
                chains[-1].ops.append(op)
                continue
            if pos != 0:
                raise _error(op, f"chain member at position {pos} does not follow its chain (tb.chain = {cid})")
            chains.append(_Chain([op], stage, level))
            current_id = key
        for ch in chains:
            poss = [self.int_attr(o, "tb.chain_pos") for o in ch.ops]
            if poss != list(range(len(poss))):
                raise _error(ch.ops[0], f"chain positions {poss} are not 0..{len(poss) - 1} in order")
        return chains

    def build(self) -> cute.KernelOp:
        graph = self.graph
        smem_size = self.int_attr(graph, "tb.smem_size")
        ops = list(graph.body.block.ops)
        outputs = [op for op in ops if isinstance(op, tb.OutputOp)]
        out_index = {op: i for i, op in enumerate(outputs)}
        out_types = list(graph.outputs.types)
        in_types = list(graph.inputs.types)
        self.kernel_arg_strides = [dtensor_strides(v) for v in graph.outputs] + [
            dtensor_strides(v) for v in graph.inputs
        ]
        for v, st in zip([*graph.outputs, *graph.inputs], self.kernel_arg_strides):
            dims = shape_of(v)
            self.check_element_type(graph, element_type_of(v))
            if len(st) != len(dims):
                raise _error(graph, f"strides {st} do not match the rank of {dims}")
            if sum((d - 1) * s for d, s in zip(dims, st)) > MAX_OFFSET:
                raise _error(graph, f"a DTensor of shape {dims} with strides {st} exceeds 32-bit element offsets")

        block = Block(arg_types=[*out_types, *in_types])
        kargs = list(block.args)
        for i, arg in enumerate(kargs):
            arg.name_hint = f"o{i}" if i < len(out_types) else f"i{i - len(out_types)}"

        allocs = self.alloc_tiles(ops)
        chains = self.chains(ops)
        body: list[Operation] = list(allocs)
        fused = self.register_chains(chains)
        fused_by_op = {op: rc for rc in fused for op in (*rc.first, rc.total, *rc.second)}

        # prologue: accumulator state
        reg_accums: dict[Operation, SSAValue] = {}
        inits: list[Operation] = []
        for rc in fused:
            p_shape = shape_of(rc.first_matmul.result)[-2:]
            init = cute.MmaInitOp(cute.FragmentType(p_shape, self.chain_mma(rc.first_matmul)))
            init.result.name_hint = f"psum{len(self.chain_sums)}"
            self.chain_sums[rc] = init.result
            inits.append(init)
        for ch in chains:
            lead = ch.ops[0]
            if self.is_register_accum(ch):
                fusion = fused_by_op.get(lead)
                frag_type = self.chain_acc_type(fusion) if fusion is not None else self.matmul_parts(ch)[1]
                init = cute.MmaInitOp(frag_type)
                init.result.name_hint = f"racc{len(reg_accums)}"
                reg_accums[ch.ops[-1]] = init.result
                inits.append(init)
                continue
            if lead in fused_by_op:
                continue  # the row-sum accumulator of a cute.mma_chain lives in registers
            for op in ch.ops:
                if isinstance(op, tb.ForloopAccumOp):
                    fill_value = float("-inf") if op.accum_kind == "max" else 0.0
                    fill = cute.FillOp(self.tile(op, op.result), fill_value)
                    if "tb.accum_in_reg" in op.attributes:
                        # an elementwise-chain accumulator tb-plan-smem planned as living in
                        # registers through the loop: the printer must keep it there
                        fill.attributes[cute.ACCUM_IN_REG] = UnitAttr()
                    inits.append(fill)
            if isinstance(lead, tb.ReductionMaxOp) and ch.stage == "loop":
                inits.append(cute.FillOp(self.tile(lead, lead.max), float("-inf")))

        by_stage: dict[str, list[_Chain]] = {"pre": [], "loop": [], "post": []}
        for ch in chains:
            by_stage[ch.stage].append(ch)

        def emit_stage(stage_chains: Sequence[_Chain], iv: SSAValue | None) -> list[Operation]:
            out: list[Operation] = []
            prev_level: int | None = None
            pending_async = False
            for ch in stage_chains:
                fusion = fused_by_op.get(ch.ops[0])
                if fusion is not None and ch.ops[0] is not fusion.first[0]:
                    continue  # lowered with its chain's first matmul (no level of its own, no barrier)
                if prev_level is not None and ch.level != prev_level:
                    if pending_async:
                        out += [cute.CpAsyncCommitOp(), cute.CpAsyncWaitOp(self.num_stages - 1)]
                        pending_async = False
                    out.append(cute.BarrierOp())
                prev_level = ch.level
                lead = ch.ops[0]
                if fusion is not None:
                    out += self.lower_register_chain(fusion, reg_accums)
                elif isinstance(lead, tb.InputOp):
                    out += self.lower_input(lead, kargs, iv, prologue=None)
                    pending_async |= lead in self.pipelined
                elif isinstance(lead, tb.OutputOp):
                    out += self.lower_output(lead, out_index[lead], kargs)
                else:
                    out += self.lower_chain(ch, reg_accums)
            if pending_async:
                out += [cute.CpAsyncCommitOp(), cute.CpAsyncWaitOp(self.num_stages - 1)]
            return out

        for ch in by_stage["pre"]:
            if not isinstance(ch.ops[0], tb.InputOp):
                raise _error(ch.ops[0], "only tb.input ops run before the loop (tb.stage = \"pre\")")
        body += emit_stage(by_stage["pre"], None)
        body += inits
        prologue = [op for op in ops if op in self.pipelined]
        if prologue:
            # iterations 0 .. N-2 in flight before the loop, one commit group per iteration
            # (iteration it waits for its own group with N-1 younger groups pending)
            # (an empty group past the last iteration keeps that count right)
            for k in range(self.num_stages - 1):
                for op in prologue if k < self.iters else ():
                    assert isinstance(op, tb.InputOp)
                    body += self.lower_input(op, kargs, None, prologue=k)
                body.append(cute.CpAsyncCommitOp())
        body.append(cute.BarrierOp())

        loop = cute.ForOp(self.iters)
        loop.iv.name_hint = "it"
        loop_body = emit_stage(by_stage["loop"], loop.iv)
        if by_stage["loop"]:
            loop_body.append(cute.BarrierOp())
        loop.body.block.insert_ops_before(loop_body, loop.body.block.last_op)  # type: ignore[arg-type]
        if by_stage["loop"]:
            body.append(loop)

        if reg_accums:
            for op, frag in reg_accums.items():
                body.append(cute.FragStoreOp(frag, self.tile(op, op.results[0]), [], "store"))
            for rc, frag in self.chain_sums.items():
                body.append(cute.FragStoreOp(frag, self.tile(rc.total, rc.total.result), [], "store"))
            body.append(cute.BarrierOp())
        post = by_stage["post"]
        sums = [ch for ch in post if isinstance(ch.ops[0], tb.GridSumOp)]
        if sums:
            post = [ch for ch in post if ch not in sums]
            feeding = [ch for ch in post if ch.level < sums[0].level]
            if feeding:  # e.g. a reduction that shrinks a partial before it is summed
                body += emit_stage(feeding, None) + [cute.BarrierOp()]
            body += self.lower_grid_sums(sums, post)
            post = [ch for ch in post if ch not in feeding]
        body += emit_stage(post, None)
        # P of a cute.mma_chain was planned a shared tile (tb-plan-smem runs before this
        # lowering decides) that nothing reads now
        p_tiles = {self.smem.get(rc.first[-1].results[0]) for rc in fused}
        body = [op for op in body if not (isinstance(op, cute.SmemAllocOp) and op.result in p_tiles and not op.result.uses)]
        block.add_ops(body)

        kernel = cute.KernelOp(
            self.name,
            list(graph.inputs),
            out_types,
            Region(block),
            grid=graph.grid,
            block=graph.block,
            smem_size=smem_size,
            forloop_range=self.iters,
            arg_strides=self.kernel_arg_strides,
        )
        for key, value in graph.attributes.items():
            if key.startswith("kn."):
                kernel.attributes[key] = value
        return kernel


def kernel_name(func_name: str, index: int) -> str:
    """`<func>_k<i>` as a C identifier (characters outside [A-Za-z0-9_] become '_')."""
    ident = re.sub(r"[^A-Za-z0-9_]", "_", f"{func_name}_k{index}")
    return ident if not ident[0].isdigit() else f"k_{ident}"


def cute_numel(shape: Sequence[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


# ---------------------------------------------------------------------------------------
# The pass


@dataclass(frozen=True)
class ConvertTbToCutePass(ModulePass):
    """Lower every `kn.customized` (after tb-plan-smem) to a `cute.kernel` named
    `<func>_k<i>` (i counts the customized ops of the function in program order)."""

    name = "convert-tb-to-cute"

    tensor_cores: bool = True
    """Use SM80 `mma.sync` atoms for fp16/bf16 matmuls (else the UniversalFMA fallback)."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        rewriter = Rewriter()
        for fn in [o for o in op.walk() if isinstance(o, func.FuncOp)]:
            graphs = [o for o in fn.walk() if isinstance(o, CustomizedOp)]
            for i, graph in enumerate(graphs):
                try:
                    name = kernel_name(fn.sym_name.data, i)
                    kernel = _KernelBuilder(graph, name, self.tensor_cores).build()
                except ConvertError as err:
                    err.op.emit_error(err.message, PassFailedException(err.message))
                rewriter.replace_op(graph, kernel)
