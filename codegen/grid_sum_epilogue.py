"""The grid-sum epilogue in registers: which elementwise ops after a `cute.grid_sum` run
on the summed values in registers instead of through shared memory.

After the arrival, the last block of a split group sums the group's partials and runs the
rest of the kernel.  Printed op by op, each sum is written to a shared tile, then each
elementwise op reads its operands back, writes its result and waits at a block barrier
(gated_mlp: two sums, silu, mul: three barriers and four tile passes before the output
copy).  When an elementwise op walks the same elements in the same order as the sum (same
shape, the natural order: last dim fastest) every thread reads only values that it
computed itself, so the values can stay in registers and the barriers between the ops can
go: one *phase* is the sums of one tile shape plus the elementwise ops on that shape that
follow them, and a barrier ends each phase.  A value is still written to its shared tile
when anything outside its phase reads it (a later phase through a broadcast, the output
copy); when its one reader is the output copy, the last block writes the global elements
itself and the copy is not printed.  The printer loads every phase's sums before the first phase, so that all their L2
round trips overlap as in `mx::grid_partial_sum` (phase by phase, rmsnorm bs8 lost 0.4 µs).
Measured (NVIDIA H200, 2026-11-24, medians of 5 interleaved runs): gated_mlp c6s2x 20.9 ->
20.6 µs, c1s2xr 22.3 -> 21.9, rmsnorm bs8 c3s2xr 17.8 -> 17.7.

Numerics are unchanged: the sums add the same partials in the same split order
(`mx::grid_partial_sum_mine`), and each value is rounded to its tile's element type as the
shared tile would have stored it (`mx::round_as`).

Conservative rules (anything else is printed op by op as before): an op joins only with
mode `store`, a shared (not register-resident) output, the natural order, and a tile size
that is a multiple of the block's thread count or smaller than it (at most 16 elements per
thread); operands are either values of the phase with the phase's shape, or shared tiles
that were complete before the phase began; and no tile a phase stores may overlap a shared
tile that the phase reads (threads no longer wait for each other inside a phase).
"""

from __future__ import annotations

import math
from collections.abc import Container, Sequence
from dataclasses import dataclass, field

from xdsl.ir import Operation, SSAValue

from mirage_xdsl.dialects import cute

MAX_TRIPS = 16
"""Elements per thread and phase value (registers: every sum of a phase lives at once)."""


@dataclass
class Phase:
    """Sums of one tile shape and the elementwise ops on it, in registers."""

    shape: tuple[int, ...]
    sums: list[SSAValue] = field(default_factory=list)
    """`cute.grid_sum` results computed in this phase (in the op's result order)"""
    ops: list[cute.ElementwiseOp] = field(default_factory=list)
    stored: set[SSAValue] = field(default_factory=set)
    """phase values also written to their shared tile (read outside the phase)"""

    @property
    def values(self) -> list[SSAValue]:
        return self.sums + [op.out for op in self.ops]

    @property
    def size(self) -> int:
        return math.prod(self.shape)


@dataclass
class EpiloguePlan:
    phases: list[Phase]
    unfused_sums: list[SSAValue]
    """sums that no phase computes (printed as before, ahead of the phases)"""
    consumed: int
    """how many ops after the grid sum the phases replace (barriers included)"""
    copies_out: dict[SSAValue, cute.CopyS2GOp] = field(default_factory=dict)
    """phase value -> the copy that is its tile's only reader: the phase stores the value
    to global memory itself and the copy is not printed (nor the tile written)"""


def _shape(value: SSAValue) -> tuple[int, ...]:
    typ = value.type
    assert isinstance(typ, cute.SmemTensorType)
    return tuple(typ.get_shape())


def _natural(order: Sequence[int], shape: Sequence[int]) -> bool:
    """Whether `order` (fastest dim first) walks a tile like the grid sum's flat index:
    last dim fastest; dims of extent 1 do not matter."""
    walked = [d for d in order if shape[d] > 1]
    return walked == sorted(walked, reverse=True)


def _trips_ok(size: int, nt: int) -> bool:
    return size < nt or (size % nt == 0 and size // nt <= MAX_TRIPS)


class _Planner:
    def __init__(self, grid_sum: cute.GridSumOp, nt: int, register_resident: Container[SSAValue]):
        self.nt = nt
        self.register_resident = register_resident
        self.pending: list[SSAValue] = list(grid_sum.outs)
        self.phases: list[Phase] = []

    def eligible(self, op: Operation) -> bool:
        if not isinstance(op, cute.ElementwiseOp) or op.mode.data != "store":
            return False
        if op.out in self.register_resident or cute.tile_byte_range(op.out) is None:
            return False
        shape = _shape(op.out)
        return _natural(cute.dense_ints(op.order), shape) and _trips_ok(math.prod(shape), self.nt)

    def fits(self, phase: Phase, op: cute.ElementwiseOp, fresh: bool) -> bool:
        """Whether `op` can run in `phase` (for a `fresh` phase: its sums not taken yet)."""
        shape = _shape(op.out)
        if shape != phase.shape:
            return False
        for v in op.ins:
            if v in phase.values or (fresh and v in self.pending and _shape(v) == shape):
                if _shape(v) != shape:
                    return False  # a broadcast needs the whole tile: shared memory after a barrier
                continue  # a register of this thread
            if v in self.pending:
                return False  # a sum that no phase has computed yet
            # else a shared tile complete before the phase: written before the grid sum, or
            # by an earlier phase (stored because this op reads it; that phase's barrier)
        return True

    def start(self, op: cute.ElementwiseOp) -> Phase | None:
        phase = Phase(_shape(op.out))
        if not self.fits(phase, op, fresh=True):
            return None
        phase.sums = [v for v in self.pending if _shape(v) == phase.shape]
        if not phase.sums:
            return None
        self.pending = [v for v in self.pending if v not in phase.sums]
        return phase


def _mark_stored(phase: Phase, grid_sum: cute.GridSumOp) -> None:
    inside = set(phase.ops) | {grid_sum}  # the grid sum names its output tiles too
    for v in phase.values:
        if any(use.operation not in inside for use in v.uses):
            phase.stored.add(v)


def _hazard_free(phase: Phase) -> bool:
    """No stored tile of the phase overlaps a shared tile the phase reads."""
    values = set(phase.values)
    return cute.disjoint_tiles(phase.stored, [v for op in phase.ops for v in op.ins if v not in values])


def plan_epilogue(
    grid_sum: cute.GridSumOp, following: Sequence[Operation], nt: int, register_resident: Container[SSAValue]
) -> EpiloguePlan | None:
    """The phases that replace a prefix of `following` (the ops after `grid_sum` in its
    block), or None when nothing can be fused (print op by op)."""
    if not following or not isinstance(following[0], cute.BarrierOp):
        return None
    planner = _Planner(grid_sum, nt, register_resident)
    current: Phase | None = None
    consumed = 1
    k = 1
    while k < len(following):
        op = following[k]
        if isinstance(op, cute.BarrierOp):
            k += 1
            continue
        if not planner.eligible(op):
            break
        assert isinstance(op, cute.ElementwiseOp)
        if current is not None and planner.fits(current, op, fresh=False):
            current.ops.append(op)
        else:
            nxt = planner.start(op)
            if nxt is None:
                break
            if current is not None:
                planner.phases.append(current)
            current = nxt
            current.ops.append(op)
        k += 1
        consumed = k
    if current is not None:
        planner.phases.append(current)
    if not planner.phases:
        return None
    if consumed < len(following) and isinstance(following[consumed], cute.BarrierOp):
        consumed += 1  # each phase ends with its own barrier
    for phase in planner.phases:
        _mark_stored(phase, grid_sum)
        if not _hazard_free(phase):
            return None
    return EpiloguePlan(planner.phases, planner.pending, consumed, _copies_out(planner.phases, following[consumed:]))


def _copies_out(phases: Sequence[Phase], later: Sequence[Operation]) -> dict[SSAValue, cute.CopyS2GOp]:
    """Stored phase values whose one reader is a copy to global memory among the `later`
    ops of the same block: only the last block gets there, so it may write the global
    elements itself (same flat index, same rounding) instead of staging them."""
    out: dict[SSAValue, cute.CopyS2GOp] = {}
    for phase in phases:
        for v in phase.stored:
            readers = [u.operation for u in v.uses if u.operation not in phase.ops]
            if len(readers) == 1 and isinstance(readers[0], cute.CopyS2GOp) and readers[0] in later:
                out[v] = readers[0]
    return out
