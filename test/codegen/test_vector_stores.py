"""What nvcc makes of the device library's global stores and bf16 conversions (PTX, no GPU).

A 16-byte store assembled from scalars must stay ONE `st.global.v4` (codegen/include's
`mx::st_global_16`): written as `*reinterpret_cast<uint4*>(p) = v`, nvcc 13 emitted four
4-byte stores for the row chains' output rows and the sm_90a GEMM's store16 epilogue.  bf16
roundings and output pairs go through one `cvt.rn.bf16x2.f32` each (`mx::pack2`,
`mx::round_as<bf16>`), not a `cvt.rn.bf16.f32` per element plus widening."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from mirage_xdsl.driver.compile import prepare
from mirage_xdsl.driver.load import load_module
from mirage_xdsl.driver.nvcc import find_nvcc, include_dirs

SUITE = Path(__file__).resolve().parents[2] / "examples" / "suite"
NVCC = find_nvcc()
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc not installed")


def ptx_of(name: str, tmp_path: Path) -> str:
    """The PTX nvcc emits for suite program `name`'s printed CUDA (sm_90a)."""
    program = prepare(load_module(SUITE / f"{name}.mlir"), name, "sm_90a").program
    src, out = tmp_path / f"{name}.cu", tmp_path / f"{name}.ptx"
    src.write_text(program.source)
    assert NVCC is not None
    includes = [f"-I{d}" for d in include_dirs()]
    subprocess.run([NVCC, "-ptx", "-arch=sm_90a", "-std=c++17", *includes, str(src), "-o", str(out)], check=True)
    return out.read_text()


def global_stores(ptx: str) -> list[str]:
    """The opcode of every `st.global` instruction in `ptx` (e.g. `st.global.v4.b32`)."""
    return re.findall(r"^\s+(st\.global[.a-z0-9]*)", ptx, re.M)


@needs_nvcc
@pytest.mark.parametrize("name", ["suite_rmsnorm_f16", "suite_layernorm_bf16", "suite_softmax_f32", "suite_bmm_nt_f16"])
def test_output_vectors_are_single_16_byte_stores(name: str, tmp_path: Path) -> None:
    """Row chains storing whole rows (fp16, bf16, fp32) and the ping-pong GEMM's store16
    epilogue: every global store is a 16-byte vector."""
    stores = global_stores(ptx_of(name, tmp_path))
    assert stores, "no global store found"
    assert all(op.startswith("st.global.v4") for op in stores), stores


@needs_nvcc
def test_bf16_roundings_are_packed_conversions(tmp_path: Path) -> None:
    """The bf16 layernorm rounds every intermediate and output element with the paired
    conversion; no single-element bf16 conversion is left."""
    ptx = ptx_of("suite_layernorm_bf16", tmp_path)
    assert "cvt.rn.bf16x2.f32" in ptx
    assert "cvt.rn.bf16.f32" not in ptx
