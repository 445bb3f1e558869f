"""The choices convert-tb-to-cute makes (passes/conversion/tiled_mma.py, tb_to_cute_base.py):
the MMA atom of rmsnorm graph 0 (mirage-notes 2.3), thread-layout scores, atoms by dtype, the
threads of a row reduction, and swizzles."""

from __future__ import annotations

import pytest
from xdsl.dialects.builtin import bf16, f16, f32

from mirage_xdsl.passes.conversion.tb_to_cute_base import parse_swizzle, reduce_threads
from mirage_xdsl.passes.conversion.tiled_mma import choose_thr_layout, choose_tiled_mma


def test_rmsnorm_graph0_mma_choice() -> None:
    """mirage-notes 2.3: SM80_16x8x16 atom, thr_layout (1,3) (score 0.75/9216)."""
    mma = choose_tiled_mma(2, 24, 128, 128, f16, f16)
    assert mma.atom_name == "SM80_16x8x16_F32F16F16F32_TN"
    assert mma.tg == (1, 3)


@pytest.mark.parametrize(
    ("mnk", "threads", "expected"),
    [
        ((2, 24, 128), 128, (1, 3)),
        ((8, 32, 64), 128, (1, 4)),
        ((64, 64, 64), 128, (2, 2)),
        ((16, 16, 256), 128, (1, 2)),
        ((24, 24, 16), 128, (2, 2)),  # M = 24 tiles no 16*tg_m evenly: the filter is relaxed
        ((16, 8, 16), 32, (1, 1)),
    ],
)
def test_thr_layout_score(mnk: tuple[int, int, int], threads: int, expected: tuple[int, int]) -> None:
    assert choose_thr_layout(*mnk, threads) == expected


def test_atoms_by_dtype() -> None:
    assert choose_tiled_mma(16, 16, 8, 128, f16, f16).atom_name == "SM80_16x8x8_F32F16F16F32_TN"
    assert choose_tiled_mma(16, 16, 64, 128, bf16, bf16).atom_name == "SM80_16x8x16_F32BF16BF16F32_TN"
    assert choose_tiled_mma(16, 16, 64, 128, f32, f16).atom_name == "UniversalFMA"
    assert choose_tiled_mma(16, 16, 64, 128, f16, f16, tensor_cores=False).atom_name == "UniversalFMA"


def test_reduce_threads() -> None:
    assert reduce_threads(2, 128, 128) == 32  # rmsnorm: 2 rows of 128
    assert reduce_threads(16, 1024, 128) == 8
    assert reduce_threads(1024, 8, 128) == 1
    assert reduce_threads(2, 128, 100) == 1  # partial warps cannot shuffle


def test_swizzles() -> None:
    assert parse_swizzle("xor<3,3,4>", 2).bms == (3, 3, 4)
    assert parse_swizzle("xor<0,3,3>", 2).kind.data == "none"
    assert parse_swizzle("shift", 2).kind.data == "shift"
    # Hopper GMMA swizzles are over bytes: Swizzle<3,4,3> on fp16 = Swizzle<3,3,3> on elements
    gmma = parse_swizzle("xor<3,4,3>", 2)
    assert gmma.bms == (3, 3, 3)
    for byte_off in range(0, 4096, 2):
        b = byte_off ^ ((byte_off >> 3) & (7 << 4))
        assert gmma.apply(byte_off // 2) * 2 == b
