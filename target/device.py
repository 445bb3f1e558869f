"""Limits of the GPUs we compile for, with their sources.

Every number here is a hardware or CUDA-runtime limit, not a tuning choice: the source of
each is the CUDA C++ Programming Guide, section "Compute Capabilities" (table "Technical
Specifications per Compute Capability"), or the NVIDIA H100 Tensor Core GPU datasheet.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GpuLimits:
    """Hardware limits of one GPU model (sizes in bytes, counts per unit named).

    Attributes:
        arch: the `-arch` name, e.g. "sm_90".
        num_sms: streaming multiprocessors (H100 SXM and H200: 132; datasheet).
        smem_per_block_optin: dynamic shared memory one block may use after
            `cudaFuncSetAttribute(MaxDynamicSharedMemorySize)` (sm_90: 227 KiB).
        smem_per_sm: shared memory of one SM (sm_90: 228 KiB).
        smem_reserved_per_block: shared memory the driver reserves per resident block (1 KiB
            on sm_80 and later).
        registers_per_sm: 32-bit registers of one SM (64 K).
        max_threads_per_block: 1024.
        max_threads_per_sm: 2048.
        max_blocks_per_sm: 32.
        l2_bytes: L2 cache (H100 SXM: 50 MB; datasheet).
    """

    arch: str
    num_sms: int
    smem_per_block_optin: int
    smem_per_sm: int
    smem_reserved_per_block: int = 1024
    registers_per_sm: int = 65536
    max_threads_per_block: int = 1024
    max_threads_per_sm: int = 2048
    max_blocks_per_sm: int = 32
    l2_bytes: int = 50 * 1024 * 1024


SM90 = GpuLimits(arch="sm_90", num_sms=132, smem_per_block_optin=232448, smem_per_sm=233472)
"""H100 SXM / H200 (compute capability 9.0)."""

SMEM_OPTIN_PER_BLOCK: dict[str, int] = {
    "sm_80": 166912,
    "sm_86": 101376,
    "sm_87": 166912,
    "sm_89": 101376,
    "sm_90": 232448,
    "sm_100": 232448,
}
"""Opt-in dynamic shared memory per block by architecture (bytes; the Guide's table)."""

DEFAULT_SMEM_PER_BLOCK = 48 * 1024
"""Dynamic shared memory a kernel may use without opting in (bytes)."""

ELEMENTWISE_ACCUM_MAX_REGS = 32
"""Most fp32 registers per thread that one elementwise-chain accumulator may take when kept
in registers through the for-loop (the device library's `mx::RegTile`). A register budget we
chose, not a hardware limit: 32 keeps a 128-thread block's tile at 16 KiB or less and leaves
the rest of the 255 registers per thread to the loop body."""

