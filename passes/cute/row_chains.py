"""`cute-row-chains`: register-resident row chains -- a run of elementwise ops and whole-row
reductions over one [1, ..., 1, C] tile, or of elementwise ops alone over one tile of any
shape, kept in registers instead of shared memory.

Normalisation kernels (nTrans: rms_norm(X + alpha * (rms_norm(H) + X)), one 4096-wide row
per 512-thread block) are chains of elementwise passes and row sums.  Printed op by op, every
pass reads its operands from shared memory, writes its result back and waits at a block
barrier (nTrans: nine passes).  When every elementwise op walks the row in the natural order
(flat index i = tid + j * NT for the thread's j-th element) and every sum reduces the whole
row with the whole block, each thread only ever needs its own elements and the sums'
results, so the chain can run in registers: the sums become block reductions
(`mx::block_sum`, warp shuffles and one float per warp) whose result every thread holds.
A value is still written to its shared tile when an op outside the chain reads it.

Inputs that only chains read skip shared memory: the chain loads them from global memory
into registers once, before its first op, and their copies are not printed; an output
accumulator that only its copy-out reads (zero-filled, one for-loop trip) is stored from
registers (`global_io`).  A chain that then touches no whole-row shared tile lets each
thread own consecutive elements, so those loads and stores are 16-byte vectors
(`mx::load_row` / `mx::store_row`; with shared tiles, every NT-th element per thread keeps
the banks conflict-free).  Measured (NVIDIA H200, 2026-11-24, nTrans): 5.1 µs op by op, 3.6
with the chain in registers, 3.3 with global inputs and output, 2.9-3.1 with 16-byte vectors.

Numerics: each value is rounded to its tile's element type (`mx::round_as`), and with every
NT-th element per thread `mx::block_sum` adds in the order of `mx::reduce_sum` with the whole
block per output (each thread's elements in j order, shuffles 16..1, the warps' sums in warp
order), so the result is bit-identical to the op-by-op print; with consecutive elements per
thread the row sums add in another order (the same within fp16 rounding).

Elementwise ops alone need no rows: over a tile of several rows ([16, 2, 64] for rotary's
tokens x heads x half head_dim) every op that walks the same shape row-major gives a thread
the same elements, so such a "tile chain" runs in registers too (no reduction can join it:
a thread holds no whole row), and inputs broadcast along a dim other than the last (the
cosines of a token, shared by its heads) load as vectors like the rest.

Rules (anything else is printed op by op): elementwise ops with mode `store` or `add`, the
natural order and a shared output that is not register-resident; sums (and plain maxima,
`mx::block_max`: a softmax's row max) over the last dim, with the whole block, of a chain
value or of a shared row tile the chain does not write (loaded into registers once)
(`cute.reduce_threads == NT`, one output); a row length that is a multiple of the thread
count (at most `MAX_TRIPS` = 32 elements per thread); operands are chain values or shared tiles the chain
does not write; no tile the chain stores overlaps a tile it reads (other than an `add` op's
own element); a member scheduled behind a barrier touches nothing that an op printed before
the chain in its first op's level writes, and writes nothing such an op reads (the chain runs
in one piece where its first op is, so it would race with them); at least two ops.

Writes the attributes of dialects/cute/row_chains.py (`cute.row_chain` on the chain ops,
`cute.row_chain_stored`, `cute.row_chain_global` on the copies and fills a chain replaces,
`cute.row_chain_vectors` on those copies -- whether their global tensors move as 16-byte
vectors -- and `cute.row_chains` on the kernel); the CUDA printer prints each chain from
them.  Needs cute-block-reduce (threads per reduction) and cute-register-accumulators (a
register-resident accumulator never joins a chain) to have run.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Container, Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import BoolAttr, IntegerAttr, ModuleOp, UnitAttr, i64
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass

from mirage_xdsl.dialects import cute
from mirage_xdsl.dialects.cute.row_chains import (
    ROW_CHAIN,
    ROW_CHAIN_FP32,
    ROW_CHAIN_GLOBAL,
    ROW_CHAIN_LATE,
    ROW_CHAIN_RUN,
    ROW_CHAIN_SMEM,
    ROW_CHAIN_STORED,
    ROW_CHAIN_VECTORS,
    ROW_CHAINS,
    GlobalIO,
    RowChain,
    broadcast_tile,
    row_length,
    uniform_tile,
)

MAX_TRIPS = 32
"""Elements per thread (registers: every value of the chain may be live at once).  32 lets a
128-thread block chain a 4096-wide row: Mirage's saved nTrans graphs (128 threads) ran 9.9 /
10.0 µs at batch 1 / 8 op by op and 4.0 / 4.1 chained (H200, 2026-11-26, same process); the
decode combines over 32768 keys at 1024 threads that also start chaining kept their times."""


def _shape(value: SSAValue) -> tuple[int, ...]:
    typ = value.type
    assert isinstance(typ, cute.SmemTensorType)
    return tuple(typ.get_shape())


class _Builder:
    def __init__(self, nt: int, register_resident: Container[SSAValue], block_threads: Callable[[cute.ReduceOp], int]):
        self.nt = nt
        self.register_resident = register_resident
        self.block_threads = block_threads
        self.chain: RowChain | None = None
        self.tile: tuple[int, ...] | None = None
        """the shape of a chain over a whole tile (not a row): every member's"""

    def fits_length(self, c: int | None) -> bool:
        """Whether rows (or whole tiles) of `c` elements fit the registers: `c` known, a multiple of
        the thread count and at most `MAX_TRIPS` elements per thread."""
        return c is not None and c % self.nt == 0 and c // self.nt <= MAX_TRIPS

    def elementwise_fits(self, op: cute.ElementwiseOp, values: list[SSAValue]) -> int | None:
        """The row length of `op` if it can join a chain holding `values`, else None."""
        if op.mode.data not in ("store", "add") or op.out in self.register_resident or op.out in values:
            return None
        shape = _shape(op.out)
        c = row_length(shape)
        rank = len(shape)
        order = cute.dense_ints(op.order)
        if c is None or self.tile is not None:
            # a whole tile, no reductions: every member walks the same shape row-major, so
            # a thread's j-th element is the same element of each
            if (self.chain is not None and self.tile != shape) or tuple(order) != tuple(reversed(range(rank))):
                return None
            c = math.prod(shape)
        if not self.fits_length(c) or order[0] != rank - 1:
            return None
        for v in op.ins:
            if v in values and _shape(v) not in (shape, (1,) * rank):
                return None
        return c

    def reduce_fits(self, op: cute.ReduceOp, values: list[SSAValue]) -> int | None:
        """The row length of `op` if it can join a chain holding `values`, else None: a plain sum or
        max (not a running max) with mode `store` of a [1, ..., 1, C] row over its last dim (group 1)
        to one element with the whole block (`block_threads`), of a chain value or a shared tile that
        is not register-resident; never in a tile chain."""
        src = op.input
        plain = op.kind.data == "sum" or (op.kind.data == "max" and len(op.outs) == 1)  # not a running max
        # a chain value, or a shared row tile the chain reads (loaded into registers once:
        # a softmax's row max of its input, then exp(x - max) over the same registers)
        if self.tile is not None:  # a thread's registers hold no whole row of a tile chain
            return None
        if not plain or op.mode.data != "store" or (src not in values and src in self.register_resident):
            return None
        shape = _shape(src)
        c = row_length(shape)
        if not self.fits_length(c) or op.dim.value.data != len(shape) - 1 or op.group.value.data != 1:
            return None
        if math.prod(_shape(op.outs[0])) != 1 or self.block_threads(op) != self.nt:
            return None
        return c

    def add(self, op: Operation) -> bool:
        """Append `op` to the chain (opening it, a tile chain for a non-row elementwise op, when none
        is open) if it fits with the chain's row length; whether it did."""
        values = self.chain.values if self.chain is not None else []
        if isinstance(op, cute.ElementwiseOp):
            c = self.elementwise_fits(op, values)
        elif isinstance(op, cute.ReduceOp):
            c = self.reduce_fits(op, values)
        else:
            return False
        if c is None or (self.chain is not None and c != self.chain.length):
            return False
        if self.chain is None:
            self.chain = RowChain(c)
            if isinstance(op, cute.ElementwiseOp) and row_length(_shape(op.out)) is None:
                self.tile = _shape(op.out)
        self.chain.ops.append(op)
        return True


def _mark_stored(chain: RowChain) -> None:
    inside = set(chain.ops)
    for op, v in zip(chain.ops, chain.values):
        if isinstance(op, cute.ElementwiseOp) and op.mode.data == "add":
            chain.stored.add(v)  # an accumulator: its tile is the result
        elif any(use.operation not in inside for use in v.uses):
            chain.stored.add(v)


def _hazard_free(chain: RowChain) -> bool:
    """No stored tile overlaps a shared tile the chain reads (an `add` op reading its own
    element is the same thread's read-modify-write)."""
    values = set(chain.values)
    reads = [v for op in chain.ops if isinstance(op, cute.ElementwiseOp) for v in op.ins if v not in values]
    reads += [op.input for op in chain.ops if isinstance(op, cute.ReduceOp) and op.input not in values]
    return cute.disjoint_tiles(chain.stored, reads)


def _reads(op: Operation, tile: SSAValue) -> bool:
    """Whether chain op `op` reads `tile` as an operand (an elementwise input or the reduced tile)."""
    if isinstance(op, cute.ElementwiseOp):
        return tile in op.ins
    return isinstance(op, cute.ReduceOp) and op.input == tile


def global_io(kernel: cute.KernelOp, chains: Sequence[RowChain]) -> GlobalIO:
    """Inputs that only chains read, straight from global memory (their copy is not
    printed), and a chain's accumulator that only its output copy reads, straight to global
    memory (no fill, no copy), when the accumulator collects a single trip (for-loop of one
    iteration: `0 + value` is what the tile would have held) -- any member of a chain, not only
    its last op (add + rms_norm stores the sum as a second output)."""
    io = GlobalIO()
    chain_ops = {op for ch in chains for op in ch.ops}
    top = list(kernel.body.block.ops)
    loops = [op for op in top if isinstance(op, cute.ForOp)]
    single_trip = all(loop.trip_count == 1 for loop in loops)
    for op in top:
        if isinstance(op, cute.CopyG2SOp) and op.iter is None and cute.tile_byte_range(op.dst) is not None:
            readers = [u.operation for u in op.dst.uses if u.operation is not op]
            if readers and all(r in chain_ops and _reads(r, op.dst) for r in readers):
                io.loads[op.dst] = op
                io.skipped.add(op)
    if not single_trip:
        return io
    for member in (op for ch in chains for op in ch.ops):
        if not isinstance(member, cute.ElementwiseOp) or member.mode.data != "add":
            continue
        users = [u.operation for u in member.out.uses if u.operation is not member]
        fills = [u for u in users if isinstance(u, cute.FillOp) and u.parent is kernel.body.block and u.fill_value == 0.0]
        copies = [u for u in users if isinstance(u, cute.CopyS2GOp) and u.parent is kernel.body.block]
        if len(fills) == 1 and len(copies) == 1 and len(users) == 2:  # nothing else reads it
            io.stores[member.out] = copies[0]
            io.skipped.update((fills[0], copies[0]))
    return io


def smem_access(op: Operation) -> tuple[list[SSAValue], list[SSAValue]]:
    """(shared tiles `op` reads, shared tiles it writes); an op of another kind counts as
    reading and writing every shared tile among its operands."""
    if isinstance(op, cute.ElementwiseOp):
        return list(op.ins) + ([op.out] if op.mode.data != "store" else []), [op.out]
    if isinstance(op, cute.ReduceOp):
        return [op.input], list(op.outs)
    if isinstance(op, (cute.CopyG2SOp, cute.FillOp)):
        return [], [op.dst]
    if isinstance(op, cute.CopyS2GOp):
        return [op.src], []
    tiles = [v for v in op.operands if isinstance(v.type, cute.SmemTensorType)]
    return tiles, tiles


def _after_barrier_hazard(op: Operation, level_prefix: Sequence[Operation]) -> bool:
    """Whether chain member `op`, printed in one piece with the chain before a barrier it was
    scheduled after, would race with an op of the chain start's level printed before the
    chain (`level_prefix`): a tile one writes that the other reads or writes.  Same-level
    ops never depend on each other, so only members behind a barrier can."""
    reads, writes = smem_access(op)
    for other in level_prefix:
        their_reads, their_writes = smem_access(other)
        if not (cute.disjoint_tiles(their_writes, reads + writes) and cute.disjoint_tiles(writes, their_reads)):
            return True
    return False


def plan_row_chain(
    ops: Sequence[Operation],
    nt: int,
    register_resident: Container[SSAValue],
    block_threads: Callable[[cute.ReduceOp], int],
    level_prefix: Sequence[Operation] = (),
) -> RowChain | None:
    """The chain that starts at `ops[0]` (barriers between its ops included), or None.
    `level_prefix`: the ops printed before `ops[0]` since the last barrier; a member behind a
    barrier that touches what they write, or writes what they read, ends the chain before
    that barrier (the chain's one piece runs where `ops[0]` is)."""
    builder = _Builder(nt, register_resident, block_threads)
    consumed = 0
    crossed = False
    for k, op in enumerate(ops):
        if isinstance(op, cute.BarrierOp):
            crossed = True
            continue
        if crossed and _after_barrier_hazard(op, level_prefix):
            break
        if not builder.add(op):
            break
        consumed = k + 1
    chain = builder.chain
    if chain is None or len(chain.ops) < 2:
        return None
    if consumed < len(ops) and isinstance(ops[consumed], cute.BarrierOp):
        consumed += 1  # the chain ends with its own barrier
    chain.consumed = consumed
    _mark_stored(chain)
    return chain if _hazard_free(chain) else None


def unrounded_squares(chain: RowChain) -> list[cute.ElementwiseOp]:
    """Members that only square their operand, are not stored, and whose value only the
    chain's row sums read: kept in fp32 (`ROW_CHAIN_FP32`)."""
    out = []
    inside = set(chain.ops)
    for op in chain.ops:
        if not isinstance(op, cute.ElementwiseOp) or op.out in chain.stored:
            continue
        square = (
            op.fn.data == "id"
            and len(op.ins) == 1
            and op.mode.data == "store"
            and [getattr(fn, "fn_name", None) for fn in op.epilogue.data] == ["square"]
        )
        readers = [u.operation for u in op.out.uses if u.operation is not op]
        if square and readers and all(r in inside and isinstance(r, cute.ReduceOp) and r.kind.data == "sum" for r in readers):
            out.append(op)
    return out


def _register_resident(kernel: cute.KernelOp) -> set[SSAValue]:
    """Tiles cute-register-accumulators keeps in registers (`cute.reg_accum` on their fills)."""
    return {op.dst for op in kernel.body.block.ops if isinstance(op, cute.FillOp) and cute.REG_ACCUM in op.attributes}


def _block_threads(op: cute.ReduceOp) -> int:
    """Threads per output as cute-block-reduce chose them (0 before it ran: no chain)."""
    attr = op.attributes.get(cute.REDUCE_THREADS)
    return attr.value.data if isinstance(attr, IntegerAttr) else 0


def _level_prefix(ops: Sequence[Operation], k: int) -> list[Operation]:
    """The ops before `ops[k]` back to the last barrier (a for-loop ends in one too)."""
    start = k
    while start > 0 and not isinstance(ops[start - 1], (cute.BarrierOp, cute.ForOp)):
        start -= 1
    return list(ops[start:k])


def kernel_row_chains(kernel: cute.KernelOp) -> tuple[list[RowChain], GlobalIO]:
    """Every register-resident row chain of `kernel` (top level and loop body) and the tiles
    they read from / write to global memory directly."""
    resident = _register_resident(kernel)
    nt = kernel.num_threads
    chains: list[RowChain] = []
    blocks = [list(kernel.body.block.ops)]
    blocks += [list(op.body.block.ops) for op in kernel.body.block.ops if isinstance(op, cute.ForOp)]
    for ops in blocks:
        k = 0
        while k < len(ops):
            chain = None
            if isinstance(ops[k], (cute.ElementwiseOp, cute.ReduceOp)):
                chain = plan_row_chain(ops[k:], nt, resident, _block_threads, _level_prefix(ops, k))
            if chain is None:
                k += 1
                continue
            chains.append(chain)
            k += chain.consumed
    return chains, global_io(kernel, chains)


@dataclass(frozen=True)
class RowChainsPass(ModulePass):
    """Mark the register-resident row chains of every `cute.kernel` (module docstring)."""

    name = "cute-row-chains"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        """Re-mark the row chains of every `cute.kernel` in `op` (old marks removed first).

        Writes `cute.row_chain` = the chain's index on each member, `cute.row_chain_run` (the
        elements each thread holds, `chain_run`) on its first op, `cute.row_chain_late` on the
        global loads every block makes alike, `cute.row_chain_stored` on
        members whose value is also stored, `cute.row_chain_fp32` on squares only its sums
        read (`unrounded_squares`), `cute.row_chain_global` on the skipped global I/O ops,
        `cute.row_chain_vectors` on the skipped copies (`mark_vectors`) and
        `cute.row_chains` = the chain count on the kernel.

        Raises:
            Nothing.
        """
        for kernel in op.walk():
            if not isinstance(kernel, cute.KernelOp):
                continue
            clear_row_chains(kernel)
            chains, io = kernel_row_chains(kernel)
            for index, chain in enumerate(chains):
                chain.run = chain_run(chain, io, kernel.num_threads)
                chain.ops[0].attributes[ROW_CHAIN_RUN] = IntegerAttr(chain.run, i64)
                for member, value in zip(chain.ops, chain.values):
                    member.attributes[ROW_CHAIN] = IntegerAttr(index, i64)
                    if value in chain.stored:
                        member.attributes[ROW_CHAIN_STORED] = UnitAttr()
                for square in unrounded_squares(chain):
                    square.attributes[ROW_CHAIN_FP32] = UnitAttr()
            for skipped in io.skipped:
                skipped.attributes[ROW_CHAIN_GLOBAL] = UnitAttr()
            mark_vectors(chains, io)
            for copy in io.loads.values():
                if not any(cute.dense_ints(copy.block_offset)):  # every block reads the same tile
                    copy.attributes[ROW_CHAIN_LATE] = UnitAttr()
            kernel.attributes[ROW_CHAINS] = IntegerAttr(len(chains), i64)
            if chains:
                trim_shared_memory(kernel, chains, io)


def chain_run(chain: RowChain, io: GlobalIO, nt: int) -> int:
    """`ROW_CHAIN_RUN` of `chain` on `nt` threads (dialects/cute/row_chains.py).

    Every NT-th element (0) when the chain reads or keeps a whole-row shared tile: a thread's
    consecutive elements would conflict on shared-memory banks.  Otherwise 16-byte vectors
    (PER = 16 / element bytes) interleaved across the block when every global tensor of the
    chain has one element size and a thread holds several vectors: with T consecutive
    elements a warp-wide load touched half of each 32-byte sector (vectors 16 x T bytes apart),
    and the fp32 rotary ran 2.0x slower for it (69.5 against 34.7 us on an H200, 2026-11-27).
    Else T consecutive elements.  (Row sums then add in another order than the op-by-op
    print's.)"""
    trips = chain.length // nt
    values = set(chain.values)
    reads = [(op, v) for op in chain.ops for v in ([op.input] if isinstance(op, cute.ReduceOp) else op.ins)]  # type: ignore[attr-defined]
    for op, v in reads:
        if v not in values and v not in io.loads and not (isinstance(op, cute.ElementwiseOp) and broadcast_tile(v)):
            return 0
    if not all(v in io.stores or uniform_tile(v) for v in chain.stored):
        return 0
    tiles = [v for v in chain.values if v in io.loads or v in io.stores] + [v for _, v in reads if v in io.loads]
    sizes = {cute.elem_bytes(v.type.element_type) for v in tiles if isinstance(v.type, cute.SmemTensorType)}
    if len(sizes) == 1:
        per = 16 // sizes.pop()
        if trips > per and trips % per == 0:
            return per
    return trips


def row_vectors(copy: cute.CopyG2SOp | cute.CopyS2GOp, run: int) -> bool:
    """Whether a thread's runs of `run` consecutive elements of `copy`'s shared tile move as
    16-byte vectors of its global tensor: the thread holds runs (`run` > 0), the global tensor
    has unit stride along the row, a run is whole vectors (`run` x element bytes a multiple of
    16) and whole runs divide the row length (the tile's last dim, elements), and the planner
    already allows 16-byte vectors for this tensor (the copy's `vec` x element bytes = 16), so
    each row starts 16-byte aligned."""
    tile = copy.dst if isinstance(copy, cute.CopyG2SOp) else copy.src
    typ = tile.type
    assert isinstance(typ, cute.SmemTensorType)
    eb = cute.elem_bytes(typ.element_type)
    last = typ.get_shape()[-1]
    if run <= 0 or copy.tile.strides[-1] != 1 or copy.vec.value.data * eb != 16:
        return False
    return (run * eb) % 16 == 0 and last % run == 0


def _touched(chain: RowChain) -> set[SSAValue]:
    """The tiles `chain` reads (operands) or writes (its values)."""
    tiles = set(chain.values)
    for op in chain.ops:
        tiles.update(op.ins if isinstance(op, cute.ElementwiseOp) else [op.input])  # type: ignore[attr-defined]
    return tiles


def mark_vectors(chains: Sequence[RowChain], io: GlobalIO) -> None:
    """Write `ROW_CHAIN_VECTORS` on every global copy of `io`: true when every chain that
    holds runs (`RowChain.run` > 0, decided) and reads or writes its tile moves it as 16-byte
    vectors (`row_vectors`).  Chains holding every NT-th element load element by element
    whatever the mark says, so they do not veto it; two chains whose runs disagree fall back
    to elements for both (one copy, one mark)."""
    touched = [(chain.run, _touched(chain)) for chain in chains if chain.run > 0]
    copies: list[cute.CopyG2SOp | cute.CopyS2GOp] = [*io.loads.values(), *io.stores.values()]
    for copy in copies:
        tile = copy.dst if isinstance(copy, cute.CopyG2SOp) else copy.src
        runs = [run for run, tiles in touched if tile in tiles]
        copy.attributes[ROW_CHAIN_VECTORS] = BoolAttr.from_bool(bool(runs) and all(row_vectors(copy, run) for run in runs))


def clear_row_chains(kernel: cute.KernelOp) -> None:
    """Undo the chain marks of `kernel` (every op printed one by one again) and its
    `ROW_CHAIN_SMEM` trim (the block-sum scratch back after the whole plan); `ROW_CHAINS`
    is left to the caller."""
    for o in kernel.walk():
        for name in (ROW_CHAIN, ROW_CHAIN_RUN, ROW_CHAIN_STORED, ROW_CHAIN_GLOBAL, ROW_CHAIN_LATE, ROW_CHAIN_FP32, ROW_CHAIN_VECTORS):
            o.attributes.pop(name, None)
    if kernel.attributes.pop(ROW_CHAIN_SMEM, None) is not None:
        kernel.attributes[cute.KSLICE_SCRATCH] = cute.dense([(kernel.smem_bytes + 15) // 16 * 16, 0])


HEADER_BYTES = 128
"""The kernel's shared-memory header (a zeroed 16-byte word, 128-byte aligned tiles after it)."""


def live_tiles(kernel: cute.KernelOp, chains: Sequence[RowChain], io: GlobalIO) -> set[SSAValue]:
    """The shared tiles that `kernel`'s printed code still touches once its chains run in
    registers: operands of every op outside the chains and the skipped global copies and
    fills, the shared tiles a chain reads (not its own values, not tiles it loads from
    global memory) and the chain values it writes back to their tiles (not those stored
    straight to global memory)."""
    members = {op for chain in chains for op in chain.ops}
    live: set[SSAValue] = set()
    for op in kernel.walk():
        if op is kernel or op in members or op in io.skipped or isinstance(op, cute.SmemAllocOp):
            continue
        live.update(v for v in op.operands if isinstance(v.type, cute.SmemTensorType))
    for chain in chains:
        values = set(chain.values)
        for op in chain.ops:
            ins = list(op.ins) if isinstance(op, cute.ElementwiseOp) else [op.input]  # type: ignore[attr-defined]
            live.update(v for v in ins if v not in values and v not in io.loads)
        live.update(v for v in chain.stored if v not in io.stores)
    return live


def trim_shared_memory(kernel: cute.KernelOp, chains: Sequence[RowChain], io: GlobalIO) -> None:
    """Write `ROW_CHAIN_SMEM`, the end of the kernel's live tiles (`live_tiles`), when its
    chains leave the rest of tb-plan-smem's plan untouched, so a launch asks for less and
    more blocks fit an SM: a layernorm over 4096-wide fp32 rows whose chain keeps every value
    in registers asked for 98 KB per 512-thread block (2 per SM) for tiles it never used.
    The block-reduction scratch after the plan (`cute.kslice_scratch`'s base) moves down with
    it; kernels with sliced-K scratch keep their plan."""
    region = kernel.attributes.get(cute.KSLICE_SCRATCH)
    if region is None or cute.dense_ints(region)[1]:  # type: ignore[arg-type]
        return  # cute-slice-mma has not placed the scratch yet, or placed sliced-K partials there
    end = HEADER_BYTES
    for tile in live_tiles(kernel, chains, io):
        owner = tile.owner
        if not isinstance(owner, cute.SmemAllocOp):
            return
        typ = tile.type
        assert isinstance(typ, cute.SmemTensorType)
        end = max(end, max(owner.byte_offsets) + typ.cosize() * cute.elem_bytes(typ.element_type))
    size = (end + 15) // 16 * 16
    if size < kernel.smem_bytes:
        kernel.attributes[ROW_CHAIN_SMEM] = IntegerAttr(size, i64)
        kernel.attributes[cute.KSLICE_SCRATCH] = cute.dense([size, 0])
