"""What a `cute.kernel` needs beyond its tiles, read from the decisions the cute passes wrote:
the sliced-K scratch (`cute-slice-mma`), block-reduce scratch (`cute-block-reduce`), the
grid-sum arrival counters and flag, the late finisher's trips, register accumulators
(`cute-register-accumulators`), and the dynamic shared memory a launch asks for (bytes).

The printer and the launch-plan builder both read these; nothing here decides.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.dialects.builtin import DenseArrayBase, IntegerAttr
from xdsl.ir import SSAValue

from mirage_xdsl.codegen.cuda_syntax import CudaEmitError, missing_decision
from mirage_xdsl.dialects import cute
from mirage_xdsl.dialects.cute.row_chains import ROW_CHAIN, ROW_CHAIN_SMEM


@dataclass(frozen=True)
class MmaSlicing:
    """Sliced K for the kernel's tensor-core accumulators as cute-slice-mma decided it
    (header: mma.cuh): the W / P warp groups of a block whose thr_layout uses P of its W
    warps split each call's k-steps, and their partial sums meet in a scratch region
    appended to the kernel's dynamic shared memory at `base`."""

    slices: dict[SSAValue, int]  # fragment (cute.mma_init result) -> K slices
    offsets: dict[SSAValue, int]  # fragment -> byte offset of its scratch from `smem`
    base: int
    total: int  # scratch bytes (0: no slicing)


def mma_slicing(kernel: cute.KernelOp) -> MmaSlicing:
    """The sliced-K decision of `kernel`, read from `cute.kslice_scratch` and the
    `cute.kslices` / `cute.kslice_offset` of its `cute.mma_init` ops.

    Raises:
        CudaEmitError: the kernel has no `cute.kslice_scratch` (cute-slice-mma has not run)."""
    region = kernel.attributes.get(cute.KSLICE_SCRATCH)
    if not isinstance(region, DenseArrayBase):
        missing_decision(kernel, cute.KSLICE_SCRATCH, "cute-slice-mma")
    base, total = cute.dense_ints(region)
    slices: dict[SSAValue, int] = {}
    offsets: dict[SSAValue, int] = {}
    for op in kernel.walk():
        ks, off = op.attributes.get(cute.KSLICES), op.attributes.get(cute.KSLICE_OFFSET)
        if isinstance(op, cute.MmaInitOp) and isinstance(ks, IntegerAttr) and isinstance(off, IntegerAttr):
            slices[op.result] = ks.value.data
            offsets[op.result] = off.value.data
    return MmaSlicing(slices, offsets, base, total)


def reduce_threads(op: cute.ReduceOp) -> int:
    """Threads per output of `op` as cute-block-reduce chose them (`cute.reduce_threads`).

    Raises:
        CudaEmitError: the attribute is missing (cute-block-reduce has not run)."""
    attr = op.attributes.get(cute.REDUCE_THREADS)
    if not isinstance(attr, IntegerAttr):
        missing_decision(op, cute.REDUCE_THREADS, "cute-block-reduce")
    return attr.value.data


def reduce_scratch_bytes(kernel: cute.KernelOp) -> int:
    """Shared memory for block-wide reductions: one float per warp, or 0 when no reduction
    crosses a warp.  A reduction does when cute-block-reduce gave it more than 32 threads
    (`mx::reduce_rows`) or when it runs in a row chain (`mx::block_sum` / `mx::block_max`
    over the whole block, which keep each warp's value in the scratch even in a one-warp
    block: without it a 32-thread block wrote past its dynamic shared memory)."""
    nt = kernel.num_threads
    wide = any(
        isinstance(op, cute.ReduceOp) and (reduce_threads(op) > 32 or ROW_CHAIN in op.attributes) for op in kernel.walk()
    )
    return (nt // 32) * 4 if wide else 0


GRID_SUM_FLAG_BYTES = 16
"""Shared memory of `cute.grid_sum`'s "this block arrived last" flag (4 bytes, 16-aligned)."""


def grid_sum_of(kernel: cute.KernelOp) -> cute.GridSumOp | None:
    """The kernel's `cute.grid_sum` (convert-tb-to-cute emits at most one)."""
    return next((op for op in kernel.walk() if isinstance(op, cute.GridSumOp)), None)


def grid_sum_flag_offset(kernel: cute.KernelOp) -> int:
    """Byte offset of the grid-sum flag in shared memory: after the plan, the sliced-K scratch
    and the block-reduction scratch."""
    slicing = mma_slicing(kernel)
    return slicing.base + slicing.total + reduce_scratch_bytes(kernel)


def launch_smem_bytes(kernel: cute.KernelOp) -> int:
    """Dynamic shared memory of a launch of `kernel`: its plan, then the sliced-K scratch,
    then the block-reduction scratch, then the grid-sum flag."""
    if grid_sum_of(kernel) is not None:
        return grid_sum_flag_offset(kernel) + GRID_SUM_FLAG_BYTES
    slicing = mma_slicing(kernel)
    extra = slicing.total + reduce_scratch_bytes(kernel)
    live = kernel.attributes.get(ROW_CHAIN_SMEM)
    plan = live.value.data if isinstance(live, IntegerAttr) else kernel.smem_bytes
    return slicing.base + extra if extra else plan


def grid_sum_slot(op: cute.GridSumOp) -> int:
    """fp32 elements of one block's partials (its tiles `ins`, back to back)."""
    return sum(math.prod(cute.smem_shape(v)) for v in op.ins)


def grid_sum_counters(kernel: cute.KernelOp) -> int:
    """32-bit words of the counter buffer a launch of `kernel` uses (0 without grid sum): one
    arrival counter per split group, or under the late finisher (`partner_trips`) one slot of
    partial words per partner and group (codegen/include/mirage_xdsl/grid.cuh)."""
    op = grid_sum_of(kernel)
    if op is None:
        return 0
    split = kernel.grid[op.grid_axis]
    groups = math.prod(kernel.grid) // split
    return groups if op.partner_trip_count is None else groups * (split - 1) * grid_sum_slot(op)


def late_finisher_trips(kernel: cute.KernelOp) -> tuple[int, int] | None:
    """(partner, finisher) iteration counts of a late-finisher kernel, else None."""
    op = grid_sum_of(kernel)
    if op is None or op.partner_trip_count is None:
        return None
    loop = next(o for o in kernel.body.block.ops if isinstance(o, cute.ForOp))
    split, e = kernel.grid[op.grid_axis], op.partner_trip_count
    return e, split * loop.trip_count - (split - 1) * e


def register_accumulators(kernel: cute.KernelOp) -> dict[SSAValue, int]:
    """Shared tiles of `kernel` kept in registers through its loop, each with its registers
    per thread, as cute-register-accumulators marked them (`cute.reg_accum` on their fills).

    Raises:
        CudaEmitError: the kernel has no `cute.reg_accums` (the pass has not run), or a fill
            marked `cute.accum_in_reg` (its shared tile may overlap the loop's buffers) is
            not kept in registers."""
    if not isinstance(kernel.attributes.get(cute.REG_ACCUMS), IntegerAttr):
        missing_decision(kernel, cute.REG_ACCUMS, "cute-register-accumulators")
    out: dict[SSAValue, int] = {}
    for op in kernel.body.block.ops:
        if not isinstance(op, cute.FillOp):
            continue
        regs = op.attributes.get(cute.REG_ACCUM)
        if isinstance(regs, IntegerAttr):
            out[op.dst] = regs.value.data
        elif cute.ACCUM_IN_REG in op.attributes:
            msg = f"cuda target: {op.name}: planned in registers ({cute.ACCUM_IN_REG}) but has no {cute.REG_ACCUM}"
            op.emit_error(msg, CudaEmitError(msg))
    return out
