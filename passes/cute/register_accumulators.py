"""`cute-register-accumulators`: shared fp32 accumulators kept in registers through the loop.

A shared fp32 tile that a for-loop only accumulates into -- filled with 0 before the loop and
touched by nothing else there, updated by exactly one elementwise `add` or `rescale`
(`out = out * s + v`, the online softmax's rescaled sum; its scale `s` another tile) in the
loop (nothing else in the loop reads or writes it), read only after it, at most
`ELEMENTWISE_ACCUM_MAX_REGS` (passes/tb/schedule.py) per thread -- lives in registers
(header: RegTile) and is written to its shared tile once, after the loop.  This removes a
shared-memory read-modify-write per element and iteration (rms_norm's sum of squares, a
logsumexp's sum of `exp(x - max)`).

Writes (dialects/cute/compute_ops.py): on the `cute.fill` of each such tile `cute.reg_accum = i64`
(registers per thread), and on every `cute.kernel` `cute.reg_accums = i64` (how many of its
tiles stay in registers; 0 = none).  A fill marked `cute.accum_in_reg` (planned in registers
by tb-schedule / tb-plan-smem, so its shared tile may overlap the loop's buffers) that does
not qualify is an error: keeping it in shared memory would corrupt them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import Float32Type, IntegerAttr, ModuleOp, i64
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import DiagnosticException

from mirage_xdsl.dialects import cute
from mirage_xdsl.target import ELEMENTWISE_ACCUM_MAX_REGS


@dataclass(frozen=True)
class RegisterAccumulatorsPass(ModulePass):
    """Mark the register-resident accumulators of every `cute.kernel` (module docstring).

    Raises:
        DiagnosticException: a fill marked `cute.accum_in_reg` does not qualify."""

    name = "cute-register-accumulators"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        """Mark the register-resident accumulators of every `cute.kernel` in `op`.

        Each fill of such a tile gets `cute.REG_ACCUM` = its registers per thread, the kernel
        `cute.REG_ACCUMS` = their count.

        Raises:
            DiagnosticException: from `register_accumulators` (a fill marked `cute.accum_in_reg` does not qualify).
        """
        for kernel in op.walk():
            if not isinstance(kernel, cute.KernelOp):
                continue
            accs = register_accumulators(kernel)
            for fill in kernel.body.block.ops:
                if isinstance(fill, cute.FillOp) and fill.dst in accs:
                    fill.attributes[cute.REG_ACCUM] = IntegerAttr(accs[fill.dst], i64)
            kernel.attributes[cute.REG_ACCUMS] = IntegerAttr(len(accs), i64)


def register_accumulators(kernel: cute.KernelOp) -> dict[SSAValue, int]:
    """The shared tiles of `kernel` to keep in registers, each with its registers per thread.

    Raises:
        DiagnosticException: a fill marked `cute.accum_in_reg` is not one of them."""
    body = list(kernel.body.block.ops)
    out: dict[SSAValue, int] = {}
    for pos, loop in enumerate(body):
        if isinstance(loop, cute.ForOp):
            for tile in _loop_accumulators(loop, body[:pos]):
                per = -(-math.prod(tile.type.get_shape()) // kernel.num_threads)  # type: ignore[attr-defined]
                if per <= ELEMENTWISE_ACCUM_MAX_REGS:
                    out[tile] = per
    for op in body:
        if isinstance(op, cute.FillOp) and cute.ACCUM_IN_REG in op.attributes and op.dst not in out:
            msg = (
                f"cute-register-accumulators: kernel {kernel.kernel_name.data}: the accumulator filled by this cute.fill is planned in "
                f"registers ({cute.ACCUM_IN_REG}: its shared tile may overlap the loop's buffers) but is not "
                "updated by exactly one elementwise add or rescale per iteration, or takes more than "
                f"{ELEMENTWISE_ACCUM_MAX_REGS} registers per thread; drop the attribute and re-run tb-plan-smem"
            )
            op.emit_error(msg, DiagnosticException(msg))
    return out


def _loop_accumulators(loop: cute.ForOp, before: list[Operation]) -> list[SSAValue]:
    """Shared fp32 tiles that `loop` only adds (or rescales and adds) into, once per iteration, cleared by the one
    op of `before` (the ops ahead of the loop) that touches them; none for a one-trip loop,
    whose single add saves no read-modify-write in registers and whose row chain
    (cute-row-chains) can store the sum straight from its own registers instead."""
    if loop.trip_count == 1:
        return []
    inner = list(loop.body.block.ops)
    tiles: list[SSAValue] = []
    for op in inner:
        if not isinstance(op, cute.ElementwiseOp) or op.mode.data not in ("add", "rescale"):
            continue
        tile = op.out
        typ = tile.type
        if not isinstance(typ, cute.SmemTensorType) or not isinstance(typ.element_type, Float32Type) or tile in op.ins:
            continue
        if any(tile in other.operands for other in inner if other is not op):
            continue
        users = [o for o in before if tile in o.operands]
        if len(users) == 1 and isinstance(users[0], cute.FillOp) and users[0].fill_value == 0.0:
            tiles.append(tile)
    return tiles
