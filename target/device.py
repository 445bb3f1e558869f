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

    def smem_for_blocks(self, blocks: int) -> int:
        """Most dynamic shared memory (bytes) a block may ask for with `blocks` of them resident
        on one SM (each also holds `smem_reserved_per_block`)."""
        return self.smem_per_sm // blocks - self.smem_reserved_per_block

    def smem_capping_blocks(self, blocks: int) -> int:
        """Least dynamic shared memory (bytes) a block must ask for so that at most `blocks` of
        them fit one SM."""
        return self.smem_for_blocks(blocks + 1) + 1


SM90 = GpuLimits(arch="sm_90", num_sms=132, smem_per_block_optin=232448, smem_per_sm=233472)
"""H100 SXM / H200 (compute capability 9.0)."""

HOPPER_GEMM_ARCHS = ("sm_90", "sm_90a")
"""Targets of the TMA + wgmma GEMM (`cute.hopper_gemm`): wgmma exists only on sm_90a (PTX ISA,
"wgmma.mma_async" target requirements); an sm_90 request is compiled as sm_90a."""

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

MAX_TENSOR_ELEMENTS = 2**31 - 1
"""Most elements one device tensor may span (its largest element offset + 1, which for a
packed tensor is the product of its dims). The generated kernels index global memory with
32-bit `int` offsets (codegen/cuda_printer.py: tile offsets, loop counters), so an offset of
2^31 or more would wrap; tensors this large must be split into several graph inputs."""

MAX_FORLOOP_RANGE = 4096
"""Most iterations of a threadblock graph's for-loop (`forloop_range`). A bound we chose,
not a hardware limit (the loop counter is a 32-bit `int`, 2^31 - 1): the numpy reference
executor (reference/executor.py), which checks every compiled graph, runs one Python step per
iteration (about 1 ms for a five-op graph of 256 blocks), so 4096 iterations keep a check
within seconds. Mirage's own search and saved muGraphs use at most 64 iterations and our
planner (kn-partition) at most a few hundred on the benchmark shapes; a longer reduction
is split across the grid (split-K) instead."""

MAX_NESTING_DEPTH = 32
"""Deepest bracket nesting (`(`, `[`, `{`, `<`) that the tools read in IR text or muGraph
JSON. Not a device limit but one of the Python tools: xDSL's parser, verifier and printer
recurse about ten frames per level, so some 100 levels exhaust Python's default recursion
limit (1000 frames) and end in a RecursionError without a location. Kernel graphs nest at
most 8 levels (a func, a kn.customized region, a type, an attribute) and muGraph files 6, so
32 leaves room for any real input and reports deeper ones at their line and column."""
