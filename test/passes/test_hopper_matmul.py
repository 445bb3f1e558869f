"""Lone kn.matmul -> contraction.contract -> cute.hopper_gemm (kn-partition `hopper-gemm`):
the config over the recorded strides, the pipeline and the cuda target (sm_90 -> sm_90a, a
clear error for sm_80), and (GPU) bmm_nt-like graphs against the float64 reference of the kn
graph on NaN-poisoned outputs."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp
from xdsl.parser import Parser

from mirage_xdsl.codegen.cuda_target import emit_cuda
from mirage_xdsl.codegen.hopper_gemm import HopperArchError, target_arch
from mirage_xdsl.codegen.launch_plan import KernelLaunch, LibraryCall
from mirage_xdsl.dialects import kn
from mirage_xdsl.dialects.contraction.ops import ContractOp
from mirage_xdsl.dialects.cute.hopper_gemm import HopperGemmOp
from mirage_xdsl.driver.compile import make_context, prepare
from mirage_xdsl.passes.conversion.gemm_epilogue import EpilogueChain, lower_chain
from mirage_xdsl.passes.conversion.matmul_contract import has_gemm_view, matmul_config, resync
from mirage_xdsl.passes.pipeline import MirageTranspilePass
from mirage_xdsl.reference.executor import run_reference

ROOT = Path(__file__).resolve().parents[2]
BMM_NT = ROOT / "examples" / "suite" / "suite_bmm_nt_f16.mlir"
TYPES = {"float16": "f16", "bfloat16": "bf16"}


def _parse(text: str) -> ModuleOp:
    return Parser(make_context(), text).parse_module()


def _row_major(shape: tuple[int, ...]) -> list[int]:
    out, acc = [], 1
    for d in reversed(shape):
        out.append(acc)
        acc *= d
    return out[::-1]


def matmul_text(batch: tuple[int, ...], m: int, n: int, k: int, dtype: str = "float16", b_nt: bool = True) -> str:
    """`@mm(A, B) = A @ B` over [*batch, m, k] x [*batch, k, n]; `b_nt`: B stored as
    [*batch, n, k] (row-major) and read through its kn.strides, as suite_bmm_nt does."""
    t = TYPES[dtype]
    ty = lambda *s: "tensor<" + "x".join(map(str, s)) + f"x{t}>"  # noqa: E731
    a_ty, b_ty, o_ty = ty(*batch, m, k), ty(*batch, k, n), ty(*batch, m, n)
    if b_nt:
        stored = _row_major((*batch, n, k))
        b_strides = [*stored[:-2], stored[-1], stored[-2]]
    else:
        b_strides = _row_major((*batch, k, n))
    b_attr = ", ".join(map(str, b_strides))
    return (
        f"func.func @mm(%A: {a_ty}, %B: {b_ty} {{kn.strides = array<i64: {b_attr}>}}) -> {o_ty} {{\n"
        f"  %o = kn.matmul %A, %B : {a_ty}, {b_ty} -> {o_ty}\n"
        f"  func.return %o : {o_ty}\n}}\n"
    )


def forced(text: str) -> ModuleOp:
    """The graph with every kn.matmul turned into its contraction (as kn-partition does for
    the compute-bound ones), whatever the estimate says."""
    module = _parse(text)
    for op in [o for o in module.walk() if isinstance(o, kn.MatmulOp)]:
        assert has_gemm_view(op)
        lower_chain(EpilogueChain(op))
    return module


def test_config_reads_the_recorded_strides() -> None:
    module = _parse(matmul_text((8,), 64, 48, 32))
    (mm,) = [o for o in module.walk() if isinstance(o, kn.MatmulOp)]
    config = matmul_config(mm)
    assert [t.value for t in config.dim_types] == ["C", "M", "N", "K"]
    assert config.dim_sizes == [8, 64, 48, 32]
    assert config.strides == [[2048, 32, 0, 1], [1536, 0, 32, 1], [3072, 48, 1, 0]]


def test_no_contract_without_a_gemm_view() -> None:
    a_m_major = """func.func @mm(%A: tensor<64x32xf16> {kn.strides = array<i64: 1, 64>}, %B: tensor<32x48xf16>) -> tensor<64x48xf16> {
  %o = kn.matmul %A, %B : tensor<64x32xf16>, tensor<32x48xf16> -> tensor<64x48xf16>
  func.return %o : tensor<64x48xf16>
}"""
    f32 = matmul_text((), 64, 48, 32).replace("f16", "f32")
    odd_k = matmul_text((2,), 64, 48, 36)  # B rows of 36 halves: 72 bytes, not a TMA stride
    for text in (a_m_major, f32, odd_k):
        (mm,) = [o for o in _parse(text).walk() if isinstance(o, kn.MatmulOp)]
        assert not has_gemm_view(mm)


def test_contraction_computes_the_matmul() -> None:
    """The contraction's strides address the tensors' memory: the reference executor reads a
    contraction's operands as flat memory, the kn graph's as logical values."""
    rng = np.random.default_rng(1)
    text = matmul_text((3,), 16, 24, 8)
    a, b = rng.standard_normal((3, 16, 8)), rng.standard_normal((3, 8, 24))
    b_memory = np.ascontiguousarray(b.transpose(0, 2, 1)).reshape(b.shape)  # stored [batch, n, k]
    (want,) = run_reference(_parse(text), [a, b])
    (got,) = run_reference(forced(text), [a, b_memory])
    np.testing.assert_allclose(got, want, rtol=1e-12)
    np.testing.assert_allclose(want, a @ b, rtol=1e-12)


def test_resync_reads_strides_recorded_later() -> None:
    module = forced(matmul_text((), 64, 48, 32, b_nt=False))
    (contract,) = [o for o in module.walk() if isinstance(o, ContractOp)]
    assert contract.config().strides[1] == [0, 1, 48]
    fn = contract.parent_op()
    b_arg = fn.body.block.args[1]  # type: ignore[union-attr]
    from xdsl.dialects.builtin import ArrayAttr, DenseArrayBase, DictionaryAttr, i64

    fn.arg_attrs = ArrayAttr([DictionaryAttr({}), DictionaryAttr({"kn.strides": DenseArrayBase.from_list(i64, [1, 32])})])  # type: ignore[union-attr]
    assert kn.dtensor_strides(b_arg) == (1, 32)
    resync(contract)
    assert contract.config().strides[1] == [0, 32, 1]


def test_suite_bmm_nt_lowers_to_the_hopper_gemm() -> None:
    prepared = prepare(_parse(BMM_NT.read_text()), arch="sm_90")
    prepared.module.verify()
    assert prepared.arch == "sm_90a" and prepared.plan.arch == "sm_90a"
    (op,) = [o for o in prepared.module.walk() if isinstance(o, HopperGemmOp)]
    assert not op.trans_b.value.data and op.ints("b_strides") == [1, 1024, 1048576, 0]
    (step,) = prepared.plan.steps
    assert isinstance(step, KernelLaunch)
    a_map, b_map = step.tensor_maps  # no C map: ping-pong stores 16 bytes from the registers
    assert (b_map.ref.kind, b_map.ref.index) == ("input", 1)
    assert b_map.dims == (1024, 1024, 8, 1) and b_map.strides == (2048, 2097152, 16777216)  # k inner, n rows of 1024
    assert op.is_pingpong  # 512 tiles of 128 x 128, 16 k-tiles each: ping-pong (to_hopper.wants_pingpong)
    assert "mx::hopper::gemm_ws<half, 128, 6, 2, 0, 1, 1, 0, mx::hopper::NoActivation, 1, 1>" in prepared.program.source
    off = prepare(_parse(BMM_NT.read_text()), arch="sm_90", options={"arch": "sm_80"})
    assert off.arch == "sm_90" and [type(s) for s in off.plan.steps] == [LibraryCall]


def test_compile_for_another_arch_keeps_the_library_call() -> None:
    """`prepare` for sm_80 turns the route off (the wgmma GEMM does not exist there): the
    compute-bound matmul stays a library call instead of failing in the printer."""
    prepared = prepare(_parse(BMM_NT.read_text()), arch="sm_80")
    assert prepared.arch == "sm_80" and [type(s) for s in prepared.plan.steps] == [LibraryCall]
    assert not any(isinstance(o, HopperGemmOp) for o in prepared.module.walk())


def test_hopper_gemm_needs_sm_90() -> None:
    module = _parse(BMM_NT.read_text())
    MirageTranspilePass().apply(make_context(), module)
    assert target_arch(module, "sm_90") == "sm_90a" and target_arch(module, "sm_90a") == "sm_90a"
    with pytest.raises(HopperArchError, match="needs sm_90a, not sm_80; compile with mirage-transpile{arch=sm_80}"):
        emit_cuda(module, "sm_80")


def test_host_emulator_refuses_the_hopper_gemm() -> None:
    from mirage_xdsl.runtime.host_emulator import HostEmulationError, HostEmulator

    program = emit_cuda(_lowered(forced(matmul_text((2,), 64, 64, 64))), "sm_90")
    with pytest.raises(HostEmulationError, match=r"cannot run; lower the graph for a target without it \(mirage-transpile{arch=sm_80}\)"):
        HostEmulator(program)


def _lowered(module: ModuleOp) -> ModuleOp:
    MirageTranspilePass().apply(make_context(), module)
    module.verify()
    return module


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_nvcc_accepts_the_lowered_graph(tmp_path: Path) -> None:
    from mirage_xdsl.codegen.device_library import DEVICE_LIBRARY_INCLUDE

    program = emit_cuda(_lowered(forced(matmul_text((2, 3), 64, 80, 64))), "sm_90")
    assert program.arch == "sm_90a"
    src = tmp_path / "k.cu"
    src.write_text(program.source)
    cmd = ["nvcc", "-arch=sm_90a", "-cubin", "-std=c++17", f"-I{DEVICE_LIBRARY_INCLUDE}", "-o", str(tmp_path / "k.cubin"), str(src)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[:2000]


GPU_CASES = [
    ((3,), 200, 136, 104, "float16", True),  # tails in m, n and k; K-major B (bmm_nt)
    ((2,), 128, 256, 192, "bfloat16", True),
    ((2, 3), 64, 80, 64, "float16", True),  # two batch dims, one consumer
    ((), 96, 72, 64, "float16", False),  # row-major B: N-major
    ((4,), 256, 100, 128, "float16", True),  # n = 100: 4-byte stores
]


@pytest.mark.parametrize(("batch", "m", "n", "k", "dtype", "b_nt"), GPU_CASES)
def test_gpu_cases_lower(batch: tuple[int, ...], m: int, n: int, k: int, dtype: str, b_nt: bool) -> None:
    """Every GPU case has a GEMM view and lowers to one cute.hopper_gemm (CPU only)."""
    lowered = _lowered(forced(matmul_text(batch, m, n, k, dtype, b_nt)))
    assert len([o for o in lowered.walk() if isinstance(o, HopperGemmOp)]) == 1


def _run_gpu(name: str, module_kn: ModuleOp, lowered: ModuleOp, dtype: str) -> None:
    from mirage_xdsl.bench.fuzz_check import check_gpu_lowered
    from mirage_xdsl.bench.fuzz_graphs import FuzzCase

    assert emit_cuda(lowered, "sm_90").arch == "sm_90a"
    out = check_gpu_lowered(FuzzCase(name, "kernel", dtype, module_kn), lowered, seed=7)  # the reference runs the kn graph
    assert out.status == "ok", f"{out.status}: {out.reason}: {out.message}"


@pytest.mark.gpu
@pytest.mark.parametrize(("batch", "m", "n", "k", "dtype", "b_nt"), GPU_CASES)
def test_forced_hopper_matmul_matches_reference(batch: tuple[int, ...], m: int, n: int, k: int, dtype: str, b_nt: bool) -> None:
    text = matmul_text(batch, m, n, k, dtype, b_nt)
    _run_gpu("mm", _parse(text), _lowered(forced(text)), dtype)


@pytest.mark.gpu
def test_suite_bmm_nt_matches_reference() -> None:
    """The suite's 8 x 1024^3 bmm_nt through the default pipeline (the estimate routes it)."""
    text = BMM_NT.read_text()
    lowered = _lowered(_parse(text))
    assert any(isinstance(o, HopperGemmOp) for o in lowered.walk())
    _run_gpu("suite_bmm_nt_f16", _parse(text), lowered, "float16")
