"""The grid-sum epilogue in registers as IR: the attributes `cute-grid-sum-epilogue` writes
and the CUDA printer reads (passes/cute/grid_sum_epilogue.py explains the phases).

* `EPILOGUE_PHASES` (`array<i64>`) on a `cute.grid_sum`: per result, the index of the phase
  that computes it in registers, or -1 (printed to its shared tile ahead of the phases); its
  presence says the decision was made.
* `EPILOGUE_PHASE` (`i64`) on each `cute.elementwise` of a phase (the phases follow the grid
  sum in its block, after its barrier; barriers between them belong to the phases).
* `EPILOGUE_STORED`: on a `cute.grid_sum` an `array<i64>` of 0/1 per result, on a phase op a
  unit attribute -- the value is also written to its shared tile (read outside its phase).
* `EPILOGUE_GLOBAL` (unit) on a `cute.copy_s2g` whose tile's one writer is a phase: the phase
  stores the value to global memory itself and the copy is not printed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from xdsl.dialects.builtin import DenseArrayBase
from xdsl.ir import Operation, SSAValue

from mirage_xdsl.dialects import cute

EPILOGUE_PHASES = "cute.epilogue_phases"
EPILOGUE_PHASE = "cute.epilogue_phase"
EPILOGUE_STORED = "cute.epilogue_stored"
EPILOGUE_GLOBAL = "cute.epilogue_global"


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
        """The phase's sums, then its ops' results."""
        return self.sums + [op.out for op in self.ops]

    @property
    def size(self) -> int:
        """Elements of the phase's tile shape."""
        return math.prod(self.shape)


@dataclass
class EpiloguePlan:
    """The register epilogue of one `cute.grid_sum`: the `phases` after the sum, the sums no
    phase computes (`unfused_sums`), the number of ops after the grid sum the phases replace
    (`consumed`) and the output copies the phases store themselves (`copies_out`).
    """
    phases: list[Phase]
    unfused_sums: list[SSAValue]
    """sums that no phase computes (printed as before, ahead of the phases)"""
    consumed: int
    """how many ops after the grid sum the phases replace (barriers included)"""
    copies_out: dict[SSAValue, cute.CopyS2GOp] = field(default_factory=dict)
    """phase value -> the copy that is its tile's only reader: the phase stores the value
    to global memory itself and the copy is not printed (nor the tile written)"""



def read_epilogue(grid_sum: cute.GridSumOp, following: Sequence[Operation]) -> EpiloguePlan | None:
    """The epilogue `cute-grid-sum-epilogue` marked on `grid_sum` and `following` (the ops
    after it in its block), or None when it fused nothing (print op by op).  The caller
    checks that the pass ran (`EPILOGUE_PHASES` present)."""
    attr = grid_sum.attributes.get(EPILOGUE_PHASES)
    if not isinstance(attr, DenseArrayBase):
        return None
    of_sum = [int(x) for x in attr.get_values()]
    stored_attr = grid_sum.attributes.get(EPILOGUE_STORED)
    stored_sums = [int(x) for x in stored_attr.get_values()] if isinstance(stored_attr, DenseArrayBase) else [0] * len(of_sum)
    count = max(of_sum, default=-1) + 1
    phases: list[Phase] = []
    for k in range(count):
        sums = [v for v, p in zip(grid_sum.outs, of_sum) if p == k]
        typ = sums[0].type
        assert isinstance(typ, cute.SmemTensorType)
        phase = Phase(tuple(typ.get_shape()), sums)
        phase.stored = {v for v, p, s in zip(grid_sum.outs, of_sum, stored_sums) if p == k and s}
        phases.append(phase)
    if not phases:
        return None
    last = -1
    for pos, op in enumerate(following):
        mark = op.attributes.get(EPILOGUE_PHASE)
        if mark is None:
            continue
        assert isinstance(op, cute.ElementwiseOp)
        phase = phases[mark.value.data]  # type: ignore[attr-defined]
        phase.ops.append(op)
        if EPILOGUE_STORED in op.attributes:
            phase.stored.add(op.out)
        last = pos
    consumed = last + 1
    if consumed < len(following) and isinstance(following[consumed], cute.BarrierOp):
        consumed += 1  # each phase ends with its own barrier
    unfused = [v for v, p in zip(grid_sum.outs, of_sum) if p < 0]
    copies = {op.src: op for op in following if isinstance(op, cute.CopyS2GOp) and EPILOGUE_GLOBAL in op.attributes}
    return EpiloguePlan(phases, unfused, consumed, copies)
