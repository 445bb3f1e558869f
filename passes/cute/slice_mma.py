"""`cute-slice-mma`: sliced K for the tensor-core accumulators of each `cute.kernel`.

A thr_layout of P warps in a block of W warps leaves W - P warps idle; with W % P == 0 the
W / P warp groups split each call's k-steps instead, and their partial sums meet in a scratch
region appended to the kernel's dynamic shared memory (header: mma.cuh).  The `acc` of a
`cute.mma_chain` is always sliced (its warps own different keys); the others only when all
their scratch fits `KSLICE_SCRATCH_LIMIT` and the block's shared memory stays within
`cute.MAX_SMEM_BYTES`.

Writes (dialects/cute/kernel.py, mma_ops.py): on every `cute.kernel` `cute.kslice_scratch =
array<i64: base, bytes>` (the scratch region, 16-byte aligned after the plan; bytes = 0 when
nothing is sliced), and on each sliced `cute.mma_init` `cute.kslices = i64` (the warp groups)
and `cute.kslice_offset = i64` (byte offset of its scratch from the shared-memory base).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, i64
from xdsl.ir import SSAValue
from xdsl.passes import ModulePass

from mirage_xdsl.dialects import cute

KSLICE_SCRATCH_LIMIT = 16 * 1024
"""Most shared memory (bytes) a kernel may add for sliced-K partial sums."""


@dataclass(frozen=True)
class SliceMmaPass(ModulePass):
    """Write the sliced-K decision of every `cute.kernel` (module docstring)."""

    name = "cute-slice-mma"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        """Write the sliced-K decision of every `cute.kernel` in `op` (`mark_kernel`).

        Raises:
            Nothing.
        """
        for kernel in op.walk():
            if isinstance(kernel, cute.KernelOp):
                mark_kernel(kernel)


def mark_kernel(kernel: cute.KernelOp) -> None:
    """Write `cute.kslice_scratch` on `kernel` and the slices of its sliced accumulators."""
    base = (kernel.smem_bytes + 15) // 16 * 16
    total = 0
    for init, slices in sliced_accumulators(kernel, base).items():
        frag = init.result.type
        assert isinstance(frag, cute.FragmentType)
        init.attributes[cute.KSLICES] = IntegerAttr(slices, i64)
        init.attributes[cute.KSLICE_OFFSET] = IntegerAttr(base + total, i64)
        total += frag.slice_scratch_bytes(slices)
    kernel.attributes[cute.KSLICE_SCRATCH] = cute.dense([base, total])


def warp_groups(frag: cute.FragmentType, warps: int) -> int:
    """K slices an accumulator could take in a block of `warps` warps (1: none)."""
    tgm, tgn = frag.mma.tg
    if frag.mma.atom_name == "UniversalFMA" or warps % (tgm * tgn):
        return 1
    return warps // (tgm * tgn)


def sliced_accumulators(kernel: cute.KernelOp, base: int) -> dict[cute.MmaInitOp, int]:
    """The `cute.mma_init` ops of `kernel` to slice, in program order, with their slices."""
    warps = kernel.num_threads // 32
    chained: set[SSAValue] = {op.acc for op in kernel.walk() if isinstance(op, cute.MmaChainOp)}
    candidates: dict[cute.MmaInitOp, tuple[int, int]] = {}  # init -> (slices, scratch bytes)
    for op in kernel.walk():
        if isinstance(op, cute.MmaInitOp):
            frag = op.result.type
            assert isinstance(frag, cute.FragmentType)
            ks = warp_groups(frag, warps)
            if ks > 1:
                candidates[op] = (ks, frag.slice_scratch_bytes(ks))
    optional = sum(size for op, (_, size) in candidates.items() if op.result not in chained)
    required = sum(size for op, (_, size) in candidates.items() if op.result in chained)
    keep_optional = optional <= KSLICE_SCRATCH_LIMIT and base + optional + required <= cute.MAX_SMEM_BYTES
    return {op: ks for op, (ks, _) in candidates.items() if op.result in chained or keep_optional}
