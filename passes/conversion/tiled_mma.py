"""The tiled MMA of a matmul chain (mirage-notes 3.9): the tensor-core atom for the operand
types (`mma_atom_for`) and the warp layout (tg_m, tg_n) by Mirage's data-moved score
(`choose_thr_layout`), with the CUDA-core `UniversalFMA` fallback (`choose_tiled_mma`).
"""

from __future__ import annotations

from xdsl.dialects.builtin import BFloat16Type, Float16Type
from xdsl.ir import Attribute

from mirage_xdsl.dialects import cute


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
    """The tiled MMA of an m x n x k tile product over `num_threads` threads.

    The tensor-core atom `mma_atom_for(a_type, b_type, k)` with the warp layout of
    `choose_thr_layout`; `UniversalFMA` over (num_threads, 1) threads when the operands are
    not both f16 or both bf16, the block has fewer than 32 threads, or `tensor_cores` is off.

    Raises:
        Nothing.
    """
    atom = mma_atom_for(a_type, b_type, k) if tensor_cores and num_threads >= 32 else None
    if atom is None:
        return cute.TiledMmaAttr("UniversalFMA", (num_threads, 1))
    return cute.TiledMmaAttr(atom, choose_thr_layout(m, n, k, num_threads))
