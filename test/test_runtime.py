"""Runtime: nvcc + cubin cache, input/plan validation, library ops, CompiledGraph.

CPU tests fake nvcc with a small script (counting its runs) or use the real one when it is
installed; validation and library ops run on numpy.  Tests marked `gpu` compile every
candidate of every shared muGraph file, run it on fresh random inputs with NaN-poisoned
outputs and compare with the reference executor; they also cover CUDA-graph replay, torch
inputs and launch errors.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import MUGRAPH_FILES, has_gpu
from conftest import nvcc_runs as _runs

from mirage_xdsl.codegen.launch_plan import KernelLaunch, LaunchPlan, LibraryCall, TensorRef, TensorSpec
from mirage_xdsl.driver import nvcc as compiler
from mirage_xdsl.driver.nvcc import (
    CudaCompileError,
    NvccNotFoundError,
    cache_key,
    compile_cuda,
    default_cache_dir,
    find_nvcc,
    normalize_arch,
)
from mirage_xdsl.runtime.executable import CompiledGraph, graph_segments
from mirage_xdsl.runtime.library_ops import LibraryOpError, run_library_call
from mirage_xdsl.runtime.random_inputs import numpy_values, random_inputs
from mirage_xdsl.runtime.validate import (
    InputError,
    LaunchError,
    TensorInfo,
    alloc_elements,
    check_inputs,
    check_plan,
    contiguous_strides,
    describe,
)

TINY_KERNEL = r"""
extern "C" __global__ void scale2(float* out, const float* in) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;  // launched with exactly one thread per element
  out[i] = 2.0f * in[i];
}
"""

# ---------------------------------------------------------------------------------------
# nvcc and the cache


def test_cache_hit_skips_nvcc(fake_nvcc: tuple[str, Path], tmp_path: Path) -> None:
    nvcc, log = fake_nvcc
    cache = tmp_path / "cache"
    first = compile_cuda("// a\n", "sm_90", cache_dir=cache, nvcc=nvcc)
    assert _runs(log) == 1
    assert first.parent == cache and first.suffix == ".cubin"
    assert first.read_bytes() == b"CUBIN:// a\n"
    again = compile_cuda("// a\n", "sm_90", cache_dir=cache, nvcc=nvcc)
    assert again == first and _runs(log) == 1  # no second nvcc run
    # the options are what the issue asks for
    line = log.read_text()
    for opt in ("-cubin", "-std=c++17", "-O3", "--expt-relaxed-constexpr", "-arch=sm_90", f"-I{compiler.CODEGEN_INCLUDE}"):
        assert opt in line.split()


def test_cache_key_covers_source_arch_options_version(
    fake_nvcc: tuple[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    nvcc, log = fake_nvcc
    cache = tmp_path / "cache"
    a = compile_cuda("// a\n", "sm_90", cache_dir=cache, nvcc=nvcc)
    b = compile_cuda("// b\n", "sm_90", cache_dir=cache, nvcc=nvcc)
    c = compile_cuda("// a\n", "sm_80", cache_dir=cache, nvcc=nvcc)
    monkeypatch.setenv("MIRAGE_XDSL_NVCC_FLAGS", "-lineinfo")
    d = compile_cuda("// a\n", "sm_90", cache_dir=cache, nvcc=nvcc)
    assert len({a, b, c, d}) == 4 and _runs(log) == 4
    opts = ["-O3"]
    assert cache_key("x", opts, "v1", "sm_90") == cache_key("x", opts, "v1", "90")
    assert cache_key("x", opts, "v1", "sm_90") != cache_key("x", opts, "v2", "sm_90")
    assert cache_key("x", opts, "v1", "sm_90") != cache_key("x", ["-O2"], "v1", "sm_90")
    assert len(cache_key("x", opts, "v1", "sm_90")) == 64


def test_cache_dir_from_env_and_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MIRAGE_XDSL_CACHE_DIR", str(tmp_path / "env"))
    assert default_cache_dir() == tmp_path / "env"
    assert default_cache_dir(tmp_path / "arg") == tmp_path / "arg"
    monkeypatch.delenv("MIRAGE_XDSL_CACHE_DIR")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_cache_dir() == tmp_path / "home" / ".cache" / "mirage_xdsl"


def test_cache_write_is_atomic(fake_nvcc: tuple[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    nvcc, _ = fake_nvcc
    cache = tmp_path / "cache"
    seen: list[tuple[str, str]] = []
    real_replace = os.replace

    def failing_replace(src: str, dst: str) -> None:
        seen.append((str(src), str(dst)))
        assert not Path(dst).exists()  # the final name appears only through the rename
        assert Path(src).parent == Path(dst).parent  # same directory: os.replace is atomic
        raise OSError("disk full")

    monkeypatch.setattr(compiler.os, "replace", failing_replace)
    with pytest.raises(OSError, match="disk full"):
        compile_cuda("// atomic\n", "sm_90", cache_dir=cache, nvcc=nvcc)
    assert seen
    assert not list(cache.glob("*.cubin")), "no partial cubin under the final name"
    assert not list(cache.glob(".*.tmp")), "the temporary file is removed"
    monkeypatch.setattr(compiler.os, "replace", real_replace)
    path = compile_cuda("// atomic\n", "sm_90", cache_dir=cache, nvcc=nvcc)
    assert path.read_bytes() == b"CUBIN:// atomic\n"


def test_compile_error_is_reported_and_source_kept(fake_nvcc: tuple[str, Path], tmp_path: Path) -> None:
    nvcc, _ = fake_nvcc
    with pytest.raises(CudaCompileError, match="identifier FAIL is undefined") as info:
        compile_cuda("FAIL\n", "sm_90", cache_dir=tmp_path, nvcc=nvcc)
    kept = list(tmp_path.glob("failed-*.cu"))
    assert len(kept) == 1 and kept[0].read_text() == "FAIL\n"
    assert str(kept[0]) in str(info.value)
    assert not list(tmp_path.glob("*.cubin"))


def test_nvcc_not_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MIRAGE_XDSL_NVCC", str(tmp_path / "missing-nvcc"))
    assert find_nvcc() is None
    with pytest.raises(NvccNotFoundError, match="nvcc not found"):
        compile_cuda("// x\n", "sm_90", cache_dir=tmp_path)


def test_normalize_arch() -> None:
    assert normalize_arch("sm_90") == "sm_90"
    assert normalize_arch("90") == "sm_90"
    assert normalize_arch(90) == "sm_90"
    assert normalize_arch("sm_90a") == "sm_90a"
    assert normalize_arch("compute_80") == "sm_80"
    with pytest.raises(ValueError, match="unknown CUDA architecture"):
        normalize_arch("hopper")


@pytest.mark.skipif(find_nvcc() is None, reason="nvcc not installed")
def test_real_nvcc_compiles_tiny_kernel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = compile_cuda(TINY_KERNEL, "sm_90", cache_dir=tmp_path)
    assert path.read_bytes()[:4] == b"\x7fELF"
    assert b"scale2" in path.read_bytes()  # the extern "C" kernel's symbol

    def no_nvcc(cmd: list[str]) -> None:
        raise AssertionError(f"nvcc ran again: {cmd}")

    monkeypatch.setattr(compiler, "_run_nvcc", no_nvcc)
    assert compile_cuda(TINY_KERNEL, "sm_90", cache_dir=tmp_path) == path


@pytest.mark.skipif(find_nvcc() is None, reason="nvcc not installed")
def test_real_nvcc_error(tmp_path: Path) -> None:
    with pytest.raises(CudaCompileError, match="error"):
        compile_cuda("extern \"C\" __global__ void k() { undefined_fn(); }", "sm_90", cache_dir=tmp_path)


# ---------------------------------------------------------------------------------------
# Plans used below


def spec(shape: tuple[int, ...], strides: tuple[int, ...] | None = None, dtype: str = "float16") -> TensorSpec:
    return TensorSpec(tuple(shape), tuple(strides) if strides else contiguous_strides(shape), dtype)  # type: ignore[arg-type]


def rms_plan() -> LaunchPlan:
    """`O = (X / sqrt(mean(X^2, -1))) @ W` as library calls over the workspace, the output
    column-major: exercises workspace views, specs and output strides."""
    X, W = spec((4, 64)), spec((64, 32))
    N = spec((4, 64))
    O = spec((4, 32), (1, 4))
    n_ref = TensorRef("workspace", 0, 128, N)
    return LaunchPlan(
        "graph_rms",
        (X, W),
        (O,),
        workspace_bytes=128 + 4 * 64 * 2,
        steps=(
            LibraryCall("rms_norm", (TensorRef("input", 0),), (n_ref,), {"normalized_shape": [64]}),
            LibraryCall("matmul", (n_ref, TensorRef("input", 1)), (TensorRef("output", 0),)),
        ),
    )


def kernel_plan(smem: int = 0, block: tuple[int, int, int] = (128, 1, 1)) -> LaunchPlan:
    X = spec((256,), dtype="float32")
    return LaunchPlan(
        "graph_k",
        (X,),
        (X,),
        0,
        (KernelLaunch("scale2", (2, 1, 1), block, smem, (TensorRef("output", 0), TensorRef("input", 0))),),
    )


def test_plans_without_the_pdl_field_launch_plainly() -> None:
    """Plans saved before `KernelLaunch.pdl` existed load with PDL off: their kernels do not
    wait for the previous grid, so launching them early would race."""
    plan = kernel_plan()
    raw = json.loads(plan.to_json())
    assert raw["steps"][0]["pdl"] is False
    del raw["steps"][0]["pdl"]
    assert LaunchPlan.from_json(json.dumps(raw)) == plan
    pdl = dataclasses.replace(plan, steps=(dataclasses.replace(plan.steps[0], pdl=True),))
    assert LaunchPlan.from_json(pdl.to_json()).steps[0].pdl is True  # type: ignore[union-attr]


CUDA_H_LAYOUT = r"""
#include <cuda.h>
#include <stddef.h>
#include <stdio.h>
int main(void) {
  printf("%d %zu %zu %zu %zu %zu %zu\n", (int)CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION,
         sizeof(CUlaunchAttribute), offsetof(CUlaunchAttribute, value), sizeof(CUlaunchConfig),
         offsetof(CUlaunchConfig, hStream), offsetof(CUlaunchConfig, attrs), offsetof(CUlaunchConfig, numAttrs));
  return 0;
}
"""


def test_one_wave_smem_caps_blocks_per_sm() -> None:
    """A one_wave launch takes enough shared memory that ceil(blocks / SMs) blocks fit on an SM
    and one more does not (H200: 132 SMs, 228 KiB per SM, 1 KiB reserved per block)."""
    from mirage_xdsl.runtime.programmatic_launch import one_wave_smem_bytes

    h200 = dict(sm_count=132, smem_per_sm=233472, reserved_per_block=1024, max_per_block=232448)
    for blocks, static, cap in ((384, 0, 3), (384, 4096, 3), (128, 0, 1), (1056, 0, 8), (133, 0, 2)):
        smem = one_wave_smem_bytes(blocks, 1000, static_bytes=static, **h200)
        per_block = smem + static + 1024
        assert smem % 128 == 0 and cap * per_block <= 233472 < (cap + 1) * per_block, (blocks, smem)
    assert one_wave_smem_bytes(384, 100_000, static_bytes=0, **h200) == 100_000  # never less than needed
    assert one_wave_smem_bytes(1, 0, static_bytes=2048, **h200) == 232448 - 2048  # the opt-in limit


def test_programmatic_launch_structs_match_cuda_h(tmp_path: Path) -> None:
    """The ctypes mirrors of CUlaunchAttribute / CUlaunchConfig that cuLaunchKernelEx reads
    have cuda.h's sizes and offsets (compiled against the toolkit's header)."""
    import ctypes
    import subprocess

    from mirage_xdsl.runtime import programmatic_launch as pl

    nvcc = find_nvcc()
    if nvcc is None:
        pytest.skip("needs nvcc (it compiles the probe against its cuda.h)")
    (tmp_path / "layout.c").write_text(CUDA_H_LAYOUT)
    subprocess.run([nvcc, str(tmp_path / "layout.c"), "-o", str(tmp_path / "layout")], check=True, capture_output=True)
    got = subprocess.run([str(tmp_path / "layout")], capture_output=True, text=True, check=True).stdout.split()
    attr, config = pl._LaunchAttribute, pl._LaunchConfig
    assert [int(v) for v in got] == [
        pl.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION,
        ctypes.sizeof(attr),
        attr.value.offset,
        ctypes.sizeof(config),
        config.hStream.offset,
        config.attrs.offset,
        config.numAttrs.offset,
    ]


# ---------------------------------------------------------------------------------------
# Validation


def info_of(x: np.ndarray) -> TensorInfo:
    return describe(x)


def test_describe_numpy_and_torch_like() -> None:
    x = np.zeros((4, 6), np.float16)
    assert describe(x) == TensorInfo((4, 6), (6, 1), "float16", "numpy", None)
    assert describe(x.T).strides == (1, 6)

    class FakeTorch:
        shape = (2, 3)
        dtype = "torch.bfloat16"
        is_cuda = True

        class device:
            index = 0

        def stride(self) -> tuple[int, int]:
            return (3, 1)

    FakeTorch.__module__ = "torch.fake"
    assert describe(FakeTorch()) == TensorInfo((2, 3), (3, 1), "bfloat16", "torch", 0)
    with pytest.raises(InputError, match="unsupported input type"):
        describe([1, 2, 3])


def test_check_inputs_count_shape_dtype() -> None:
    plan = rms_plan()
    X = np.zeros((4, 64), np.float16)
    W = np.zeros((64, 32), np.float16)
    check_inputs(plan, [info_of(X), info_of(W)])
    with pytest.raises(InputError, match="takes 2 inputs, got 1"):
        check_inputs(plan, [info_of(X)])
    with pytest.raises(InputError, match=r"input 1: shape \(32, 64\) but the graph was compiled for \(64, 32\)"):
        check_inputs(plan, [info_of(X), info_of(np.zeros((32, 64), np.float16))])
    with pytest.raises(InputError, match="input 0 \\(X\\): dtype float32 but the graph was compiled for float16"):
        check_inputs(plan, [info_of(X.astype(np.float32)), info_of(W)], ["X", "W"])
    with pytest.raises(InputError, match="numpy array; pass a CuPy array or a torch CUDA tensor"):
        check_inputs(plan, [info_of(X), info_of(W)], require_gpu=True)


def test_check_inputs_bfloat16_bits() -> None:
    """numpy/CuPy carry bf16 as uint16 bits (found on an H200 with era-B muGraph files)."""
    base = rms_plan()
    specs = tuple(TensorSpec(s.shape, s.strides, "bfloat16") for s in base.inputs)
    plan = LaunchPlan(base.func_name, specs, base.outputs, base.workspace_bytes, base.steps, base.arch)
    X = np.zeros((4, 64), np.uint16)
    W = np.zeros((64, 32), np.uint16)
    check_inputs(plan, [info_of(X), info_of(W)])
    with pytest.raises(InputError, match="dtype float16 but the graph was compiled for bfloat16"):
        check_inputs(plan, [info_of(X.astype(np.float16)), info_of(W)])


def test_check_inputs_strides() -> None:
    plan = rms_plan()
    X = np.zeros((4, 64), np.float16)
    Wt = np.zeros((32, 64), np.float16).T  # right shape, column-major
    with pytest.raises(InputError) as err:
        check_inputs(plan, [info_of(X), info_of(Wt)], ["X", "W"])
    assert str(err.value) == (
        "input 1 (W): strides (1, 64) but the graph was compiled for (32, 1); pass a contiguous tensor"
    )
    # strides of size-1 dims never address memory and are not compared
    plan1 = LaunchPlan("g", (spec((1, 8)),), (), 0, ())
    odd = np.lib.stride_tricks.as_strided(np.zeros(8, np.float16), (1, 8), (999 * 2, 2))
    check_inputs(plan1, [info_of(odd)])
    # a graph compiled for non-contiguous inputs says which strides it wants
    plan2 = LaunchPlan("g", (spec((4, 8), (1, 4)),), (), 0, ())
    with pytest.raises(InputError, match=r"pass a tensor with strides \(1, 4\)"):
        check_inputs(plan2, [info_of(np.zeros((4, 8), np.float16))])
    check_inputs(plan2, [info_of(np.zeros((8, 4), np.float16).T)])


def test_check_plan_shared_memory_and_limits() -> None:
    check_plan(kernel_plan(smem=100_000))
    with pytest.raises(LaunchError, match=r"needs 300000 bytes of dynamic shared memory per block but the device allows 232448"):
        check_plan(kernel_plan(smem=300_000))
    with pytest.raises(LaunchError, match=r"\(\+ 4096 static\)"):
        check_plan(kernel_plan(smem=230_000), kernel_static_smem={"scale2": 4096})
    with pytest.raises(LaunchError, match="2048 threads"):
        check_plan(kernel_plan(block=(1024, 2, 1)))
    with pytest.raises(LaunchError, match="at most 256 per block"):
        check_plan(kernel_plan(block=(512, 1, 1)), kernel_max_threads={"scale2": 256})
    bad_ws = LaunchPlan(
        "g",
        (spec((4,)),),
        (spec((4,)),),
        8,
        (LibraryCall("exp", (TensorRef("input", 0),), (TensorRef("workspace", 0, 4, spec((4,))),)),),
    )
    with pytest.raises(LaunchError, match=r"workspace slice \[4, 12\) lies outside the 8-byte workspace"):
        check_plan(bad_ws)
    bad_ref = LaunchPlan("g", (spec((4,)),), (spec((4,)),), 0, (LibraryCall("exp", (TensorRef("input", 3),), (TensorRef("output", 0),)),))
    with pytest.raises(LaunchError, match="input 3 does not exist"):
        check_plan(bad_ref)
    # grid-sum counters: inside the plan's counter buffer, and only for generated kernels
    counted = kernel_plan(smem=1024)
    launch = counted.steps[0]
    step = dataclasses.replace(launch, args=launch.args + (TensorRef("counters", 0, 4),))
    check_plan(dataclasses.replace(counted, steps=(step,), counters=2))
    with pytest.raises(LaunchError, match=r"counter at byte 4 lies outside the plan's 1 counters"):
        check_plan(dataclasses.replace(counted, steps=(step,), counters=1))
    lib = LibraryCall("exp", (TensorRef("counters", 0, 0),), (TensorRef("output", 0),))
    with pytest.raises(LaunchError, match="only generated kernels take the grid-sum counters"):
        check_plan(dataclasses.replace(bad_ref, steps=(lib,), counters=1))
    assert LaunchPlan.from_json(dataclasses.replace(counted, steps=(step,), counters=2).to_json()).counters == 2


def test_alloc_and_random_inputs() -> None:
    assert contiguous_strides((2, 3, 4)) == (12, 4, 1)
    assert alloc_elements((2, 3), (3, 1)) == 6
    assert alloc_elements((2, 3), (1, 2)) == 6
    assert alloc_elements((2, 3), (16, 1)) == 19  # padded rows
    assert alloc_elements((0, 3), (3, 1)) == 0
    specs = [spec((4, 8)), spec((4, 8), (1, 4), "float32"), spec((3, 5), (8, 1), "bfloat16")]
    a = random_inputs(specs, seed=7)
    b = random_inputs(specs, seed=7)
    c = random_inputs(specs, seed=8)
    assert [x.shape for x in a] == [(4, 8), (4, 8), (3, 5)]
    assert [describe(x).strides for x in a] == [(8, 1), (1, 4), (8, 1)]
    assert a[0].dtype == np.float16 and a[2].dtype == np.uint16
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert not np.array_equal(a[0], c[0])
    vals = numpy_values(a[2], "bfloat16")
    assert np.all(np.abs(vals) <= 0.5) and np.any(vals != 0)


# ---------------------------------------------------------------------------------------
# Library ops on numpy


def lib(op: str, args: list[np.ndarray], out: np.ndarray, **params: object) -> np.ndarray:
    run_library_call(LibraryCall(op, (), (), dict(params)), args, [out], np)  # type: ignore[arg-type]
    return out


def rand(*shape: int, dtype: type = np.float32, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1, 1, size=shape).astype(dtype)


@pytest.mark.parametrize(
    "op, fn",
    [
        ("exp", np.exp),
        ("square", np.square),
        ("sqrt", lambda x: np.sqrt(np.abs(x))),
        ("silu", lambda x: x / (1 + np.exp(-x))),
        ("sigmoid", lambda x: 1 / (1 + np.exp(-x))),
        ("gelu", lambda x: 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))),
        ("relu", lambda x: np.maximum(x, 0)),
        ("log", lambda x: np.log(np.abs(x))),
    ],
)
def test_unary_library_ops(op: str, fn: object) -> None:
    x = rand(3, 5, dtype=np.float16)
    if op in ("sqrt", "log"):
        x = np.abs(x) + np.float16(0.1)
    out = lib(op, [x], np.empty_like(x))
    want = fn(x.astype(np.float64))  # type: ignore[operator]
    np.testing.assert_allclose(out.astype(np.float64), want, rtol=2e-3, atol=2e-3)


def test_clamp_mul_scalar_binary_broadcast() -> None:
    x = rand(4, 6)
    np.testing.assert_allclose(lib("clamp", [x], np.empty_like(x), min_value=-0.25, max_value=0.5), np.clip(x, -0.25, 0.5))
    np.testing.assert_allclose(lib("mul_scalar", [x], np.empty_like(x), scalar=3.0), 3 * x, rtol=1e-6)
    y = rand(4, 1, seed=1)
    for op, fn in (("add", np.add), ("sub", np.subtract), ("mul", np.multiply), ("div", np.divide)):
        np.testing.assert_allclose(lib(op, [x, y], np.empty_like(x)), fn(x, y), rtol=1e-5)
    p = np.abs(x) + 0.5
    np.testing.assert_allclose(lib("pow", [p, y], np.empty_like(x)), np.power(p, y), rtol=1e-5)
    with pytest.raises(LibraryOpError, match="needs the parameter 'scalar'"):
        lib("mul_scalar", [x], np.empty_like(x))
    with pytest.raises(LibraryOpError, match="unknown library op 'frobnicate'"):
        lib("frobnicate", [x], np.empty_like(x))


def test_matmul_reduction_rms_norm() -> None:
    a, b = rand(2, 3, 8, dtype=np.float16), rand(2, 8, 5, dtype=np.float16, seed=1)
    out = lib("matmul", [a, b], np.empty((2, 3, 5), np.float16))
    np.testing.assert_allclose(out.astype(np.float64), a.astype(np.float64) @ b.astype(np.float64), rtol=1e-2, atol=1e-2)
    x = rand(3, 12)
    # strided groups: out[:, j] = sum_k x[:, j + 4k]
    red = lib("reduction", [x], np.empty((3, 4), np.float32), dim=1, size=4)
    np.testing.assert_allclose(red, x[:, 0:4] + x[:, 4:8] + x[:, 8:12], rtol=1e-5)
    np.testing.assert_allclose(lib("reduction", [x], np.empty((1, 12), np.float32), dim=0, size=1), x.sum(0, keepdims=True), rtol=1e-5)
    rms = lib("rms_norm", [x], np.empty_like(x), normalized_shape=[12])
    np.testing.assert_allclose(rms, x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True)), rtol=1e-5)
    with pytest.raises(LibraryOpError, match="not divisible into groups of 5"):
        lib("reduction", [x], np.empty((3, 5), np.float32), dim=1, size=5)


def test_concat_chunk_identity_and_strided_result() -> None:
    a, b = rand(2, 3), rand(2, 5, seed=1)
    np.testing.assert_array_equal(lib("concat", [a, b], np.empty((2, 8), np.float32), dim=1), np.concatenate([a, b], 1))
    x = rand(6, 4)
    parts = [np.empty((2, 4), np.float32) for _ in range(3)]
    run_library_call(LibraryCall("chunk", (), (), {"dim": 0}), [x], parts, np)
    for i, p in enumerate(parts):
        np.testing.assert_array_equal(p, x[2 * i : 2 * i + 2])
    np.testing.assert_array_equal(lib("all_reduce", [x], np.empty_like(x)), x)
    # a column-major result view receives the values at the right places
    buf = np.full(8, np.nan, np.float32)
    col = np.lib.stride_tricks.as_strided(buf, (2, 4), (4, 8))
    lib("exp", [a[:, :1] * np.ones((2, 4), np.float32)], col)
    np.testing.assert_allclose(buf.reshape(4, 2).T, np.exp(a[:, :1] * np.ones((2, 4))), rtol=1e-6)


def test_bfloat16_storage_round_trip() -> None:
    vals = np.array([1.0, -2.5, 0.1, 3.0e38], np.float32)
    bits = np.empty(4, np.uint16)
    run_library_call(LibraryCall("mul_scalar", (), (), {"scalar": 1.0}), [(vals.view(np.uint32) >> 16).astype(np.uint16)], [bits], np, ["bfloat16"], ["bfloat16"])
    back = numpy_values(bits, "bfloat16")
    np.testing.assert_allclose(back, vals, rtol=1e-2)
    nan_bits = np.empty(1, np.uint16)
    run_library_call(LibraryCall("log", (), (), {}), [np.array([0xBF80], np.uint16)], [nan_bits], np, ["bfloat16"], ["bfloat16"])
    assert np.isnan(numpy_values(nan_bits, "bfloat16")[0])  # log(-1)


# ---------------------------------------------------------------------------------------
# The plan machinery on the host


def test_run_host_library_plan_with_workspace_and_strided_output() -> None:
    plan = rms_plan()
    X, W = random_inputs(plan.inputs, seed=3)
    g = CompiledGraph(plan, None, input_names=["X", "W"], poison_outputs=True)
    (O,) = g.run_host(X, W)
    assert O.shape == (4, 32) and describe(O).strides == (1, 4)
    x, w = X.astype(np.float64), W.astype(np.float64)
    want = (x / np.sqrt(np.mean(x * x, -1, keepdims=True))) @ w
    err = np.max(np.abs(O.astype(np.float64) - want)) / np.max(np.abs(want))
    assert err < 1e-2
    with pytest.raises(InputError, match=r"input 1 \(W\): strides \(1, 64\)"):
        g.run_host(X, np.ascontiguousarray(W.T).T)
    with pytest.raises(LaunchError, match="needs a GPU"):
        CompiledGraph(kernel_plan(), None).run_host(np.zeros(256, np.float32))


LIBRARY_CASES: dict[str, tuple[dict[str, Any], list[tuple[int, ...]], list[tuple[int, ...]]]] = {
    "matmul": ({}, [(4, 8), (8, 3)], [(4, 3)]),
    "reduction": ({"dim": 1, "size": 2}, [(4, 8)], [(4, 2)]),
    "reduction_max": ({"dim": 1}, [(4, 8)], [(4, 1)]),
    "rms_norm": ({"normalized_shape": [8], "eps": 0.0}, [(4, 8)], [(4, 8)]),
    "concat": ({"dim": 0}, [(4, 8), (2, 8)], [(6, 8)]),
    "chunk": ({"dim": 1, "chunks": 2}, [(4, 8)], [(4, 4), (4, 4)]),
    "reshape": ({"shape": [8, 4]}, [(4, 8)], [(8, 4)]),
    "all_reduce": ({}, [(4, 8)], [(4, 8)]),
    "copy": ({}, [(4, 8)], [(4, 8)]),
    "clamp": ({"min": -0.2, "max": 0.3}, [(4, 8)], [(4, 8)]),
    "mul_scalar": ({"scalar": 1.5}, [(4, 8)], [(4, 8)]),
}


def test_host_emulator_library_steps_match_the_runtime() -> None:
    """Every op the runtime runs as a library call (runtime/library_ops.py `LIBRARY_OPS`) runs
    in the host emulator too, with the same result (a softmax over 50257 columns left its row
    max to the library, which the emulator did not know)."""
    from mirage_xdsl.runtime.host_emulator import _library
    from mirage_xdsl.runtime.library_ops import LIBRARY_OPS

    rng = np.random.default_rng(4)
    for op in LIBRARY_OPS:
        params, in_shapes, out_shapes = LIBRARY_CASES.get(op, ({}, [(4, 8)] * (2 if op in ("add", "sub", "mul", "div", "pow") else 1), [(4, 8)]))
        args = [rng.uniform(0.5, 1.5, size=shape) for shape in in_shapes]
        refs = [np.full(shape, np.nan) for shape in out_shapes]
        call = LibraryCall(op, tuple(TensorRef("input", i) for i in range(len(args))), tuple(TensorRef("output", i) for i in range(len(refs))), params)
        run_library_call(call, args, refs, np)
        got = _library(call, args)
        assert len(got) == len(refs), op
        for g, r in zip(got, refs):
            np.testing.assert_allclose(g, r, rtol=1e-12, err_msg=op)


def test_poisoned_outputs_reveal_unwritten_elements() -> None:
    X = spec((4,), dtype="float32")
    plan = LaunchPlan("g", (X,), (X, X), 0, (LibraryCall("exp", (TensorRef("input", 0),), (TensorRef("output", 0),)),))
    a, b = CompiledGraph(plan, None, poison_outputs=True).run_host(np.zeros(4, np.float32))
    assert np.all(a == 1) and np.all(np.isnan(b))


def test_graph_segments_keep_cublas_calls_eager() -> None:
    k = kernel_plan().steps[0]
    mm = LibraryCall("matmul", (), ())
    ex = LibraryCall("exp", (), ())
    segs = graph_segments([k, ex, mm, k, mm, mm, ex])
    assert [(kind, len(steps)) for kind, steps in segs] == [
        ("graph", 2), ("eager", 1), ("graph", 1), ("eager", 1), ("eager", 1), ("graph", 1)
    ]
    assert graph_segments([]) == []


@pytest.mark.skipif(has_gpu(), reason="checks the no-GPU error")
def test_call_without_gpu_is_a_clear_error() -> None:
    g = CompiledGraph(kernel_plan(), None)
    with pytest.raises(LaunchError, match="CuPy is needed|no CUDA GPU"):
        g(np.zeros(256, np.float32))


def test_plan_json_round_trip_through_runtime() -> None:
    plan = rms_plan()
    again = LaunchPlan.from_json(plan.to_json())
    X, W = random_inputs(plan.inputs, seed=1)
    a = CompiledGraph(plan, None).run_host(X, W)[0]
    b = CompiledGraph(again, None).run_host(X, W)[0]
    np.testing.assert_array_equal(a, b)


# ---------------------------------------------------------------------------------------
# compile() without a GPU


@pytest.mark.skipif(find_nvcc() is None, reason="nvcc not installed")
def test_compile_on_cpu_only_machine(mugraph_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("mirage_xdsl.passes.pipeline", reason="the mirage-transpile pipeline is not there yet")
    pytest.importorskip("mirage_xdsl.codegen.cuda_target", reason="emit_cuda is not there yet")
    import mirage_xdsl
    from mirage_xdsl.frontends.mugraph_import import load_mugraph_file

    module = load_mugraph_file(mugraph_dir / "lora.json")
    before = str(module)
    g = mirage_xdsl.compile(module, "graph_1", "sm_90", cache_dir=tmp_path)
    assert str(module) == before, "compile() works on a clone"
    assert isinstance(g, CompiledGraph) and g.func_name == "graph_1" and g.arch == "sm_90"
    assert g.cubin_path is not None and g.cubin_path.read_bytes()[:4] == b"\x7fELF"
    assert g.kernel_names and all(k.encode() in g.cubin_path.read_bytes() for k in g.kernel_names)
    assert [s.shape for s in g.plan.inputs] == [(16, 256), (256, 4096), (256, 16), (16, 4096)]
    if not has_gpu():
        assert not g.loaded
        with pytest.raises(LaunchError):
            g()

    def no_nvcc(cmd: list[str]) -> None:
        raise AssertionError("the second compile of the same graph ran nvcc")

    monkeypatch.setattr(compiler, "_run_nvcc", no_nvcc)
    again = mirage_xdsl.compile(module, "graph_1", "sm_90", cache_dir=tmp_path)
    assert again.cubin_path == g.cubin_path
    with pytest.raises(ValueError, match="the module has 4 functions"):
        mirage_xdsl.compile(module, cache_dir=tmp_path)
    with pytest.raises(ValueError, match="no function named 'graph_9'"):
        mirage_xdsl.compile(module, "graph_9", cache_dir=tmp_path)


# ---------------------------------------------------------------------------------------
# GPU tests


def _candidates() -> list[tuple[str, int]]:
    out = []
    for path in MUGRAPH_FILES:
        try:
            n = len(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue
        out += [(path.name, i) for i in range(n)]
    return out


@pytest.fixture(scope="module")
def shared_modules() -> dict[str, object]:
    return {}


def _module_for(cache: dict[str, object], mugraph_dir: Path, name: str) -> object:
    if name not in cache:
        from mirage_xdsl.frontends.mugraph_import import load_mugraph_file

        cache[name] = load_mugraph_file(mugraph_dir / name)
    return cache[name]


def _needs_compiler() -> None:
    pytest.importorskip("mirage_xdsl.passes.pipeline", reason="the mirage-transpile pipeline is not there yet")
    pytest.importorskip("mirage_xdsl.codegen.cuda_target", reason="emit_cuda is not there yet")


def _to_gpu(cupy: object, x: np.ndarray) -> object:
    from mirage_xdsl.tools.mirage_run import _to_device

    return _to_device(cupy, x)


def _rel_err(outs: list[np.ndarray], refs: list[np.ndarray]) -> float:
    from mirage_xdsl.tools.mirage_run import relative_error

    return relative_error(outs, refs)


@pytest.mark.gpu
@pytest.mark.parametrize("name, index", _candidates())
def test_gpu_every_candidate_matches_reference(
    name: str, index: int, mugraph_dir: Path, shared_modules: dict[str, object], tmp_path_factory: pytest.TempPathFactory
) -> None:
    _needs_compiler()
    import cupy

    import mirage_xdsl
    from mirage_xdsl.reference.executor import run_reference

    module = _module_for(shared_modules, mugraph_dir, name)
    fname = f"graph_{index}"
    g = mirage_xdsl.compile(module, fname, poison_outputs=True, cache_dir=tmp_path_factory.getbasetemp() / "cubins")
    seed = int.from_bytes(os.urandom(4), "little")
    inputs = random_inputs(g.plan.inputs, seed)
    outs = g(*[_to_gpu(cupy, x) for x in inputs])
    cupy.cuda.get_current_stream().synchronize()
    host = [numpy_values(cupy.asnumpy(o), s.dtype) for o, s in zip(outs, g.plan.outputs)]
    refs = run_reference(module, [numpy_values(x, s.dtype) for x, s in zip(inputs, g.plan.inputs)], func_name=fname)
    err = _rel_err(host, refs)
    assert err <= 1e-2, f"{name} {fname}: max rel error {err:.3g} (seed {seed})"


def _tiny_graph(tmp_path: Path, plan: LaunchPlan, source: str = TINY_KERNEL, **kw: object) -> CompiledGraph:
    if find_nvcc() is None:
        pytest.skip("nvcc not installed")
    from mirage_xdsl.runtime.interop import detect_arch

    cubin = compile_cuda(source, detect_arch(), cache_dir=tmp_path)
    return CompiledGraph(plan, cubin, source=source, **kw).load()  # type: ignore[arg-type]


@pytest.mark.gpu
def test_gpu_kernel_launch_eager_graph_and_torch(tmp_path: Path) -> None:
    import cupy

    g = _tiny_graph(tmp_path, kernel_plan())
    x = cupy.arange(256, dtype=cupy.float32)
    (y,) = g(x)
    assert isinstance(y, cupy.ndarray)
    cupy.testing.assert_array_equal(y, 2 * x)
    # CUDA graph replay: same results, new pointer sets captured separately
    gg = _tiny_graph(tmp_path, kernel_plan(), cuda_graph=True)
    (a,) = gg(x)
    cupy.testing.assert_array_equal(a, 2 * x)
    x[:] = 5
    (b,) = gg(x)  # replay with the same pointers sees the new values
    cupy.cuda.get_current_stream().synchronize()
    cupy.testing.assert_array_equal(b, cupy.full(256, 10, cupy.float32))
    x2 = cupy.ones(256, dtype=cupy.float32)
    (c,) = gg(x2)
    cupy.testing.assert_array_equal(c, cupy.full(256, 2, cupy.float32))
    # a non-default stream
    s = cupy.cuda.Stream(non_blocking=True)
    (d,) = g(x2, stream=s)
    s.synchronize()
    cupy.testing.assert_array_equal(d, 2 * x2)
    # one CUDA graph over several input sets (device time without host work)
    launch = g.capture_sweep([[x], [x2]])
    launch()
    cupy.cuda.get_current_stream().synchronize()
    torch = pytest.importorskip("torch")
    t = torch.arange(256, dtype=torch.float32, device="cuda")
    (ty,) = g(t)
    assert isinstance(ty, torch.Tensor) and ty.is_cuda
    assert torch.equal(ty, 2 * t)
    (tg,) = gg(t)
    (tg,) = gg(t)
    torch.cuda.synchronize()
    assert torch.equal(tg, 2 * t)


CHAINED_KERNEL = r"""
#include "mirage_xdsl/runtime.cuh"
extern "C" __global__ void slow_scale2(float* out, const float* in) {
  mx::wait_for_prior_grids();
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  const long long t0 = clock64();
  while (clock64() - t0 < 20000) {  // stores late, so a reader that did not wait would see stale data
  }
  out[i] = 2.0f * in[i];
}
"""


@pytest.mark.gpu
def test_gpu_programmatic_launch_chain(tmp_path: Path) -> None:
    """Four dependent launches with PDL (each reads what the previous one wrote) give 16x,
    with NaN-poisoned outputs; they also replay in a captured sweep; the same without PDL."""
    import cupy

    X = spec((256,), dtype="float32")
    ws = lambda i: TensorRef("workspace", 0, 1024 * i, X)  # noqa: E731
    chain = [(ws(0), TensorRef("input", 0)), (ws(1), ws(0)), (ws(2), ws(1)), (TensorRef("output", 0), ws(2))]
    steps = tuple(KernelLaunch("slow_scale2", (2, 1, 1), (128, 1, 1), 0, (o, i), pdl=True) for o, i in chain)
    plan = LaunchPlan("graph_chain", (X,), (X,), 3 * 1024, steps)
    x = cupy.random.uniform(-1, 1, 256).astype(cupy.float32)
    for pdl in (True, False):
        g = _tiny_graph(tmp_path, plan, source=CHAINED_KERNEL, poison_outputs=True, programmatic_launch=pdl)
        (y,) = g(x)
        cupy.testing.assert_array_equal(y, 16 * x)
        launch = g.capture_sweep([[x], [2 * x]])
        launch()
        cupy.cuda.get_current_stream().synchronize()


@pytest.mark.gpu
def test_gpu_large_dynamic_shared_memory(tmp_path: Path) -> None:
    import cupy

    source = r"""
extern "C" __global__ void scale2(float* out, const float* in) {
  extern __shared__ float buf[];
  const int n = 100 * 1024 / 4;
  for (int i = threadIdx.x; i < n; i += blockDim.x) buf[i] = 1.0f;
  __syncthreads();
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  out[i] = 2.0f * in[i] * buf[n - 1 - threadIdx.x];
}
"""
    g = _tiny_graph(tmp_path, kernel_plan(smem=100 * 1024), source)
    x = cupy.arange(256, dtype=cupy.float32)
    (y,) = g(x)
    cupy.testing.assert_array_equal(y, 2 * x)


@pytest.mark.gpu
def test_gpu_bad_launches(tmp_path: Path) -> None:
    import cupy

    with pytest.raises(LaunchError, match="dynamic shared memory"):
        _tiny_graph(tmp_path, kernel_plan(smem=10**6))
    g = _tiny_graph(tmp_path, rms_plan(), input_names=["X", "W"])
    X, W = random_inputs(g.plan.inputs, seed=1)
    Xd, Wd = cupy.asarray(X), cupy.asarray(W)
    with pytest.raises(InputError, match=r"input 1 \(W\): strides \(1, 64\) but the graph was compiled for \(32, 1\)"):
        g(Xd, cupy.ascontiguousarray(Wd.T).T)
    with pytest.raises(InputError, match="float32 but the graph was compiled for float16"):
        g(Xd.astype(cupy.float32), Wd)


@pytest.mark.gpu
def test_gpu_library_plan_matches_host_and_graph_replay(tmp_path: Path) -> None:
    import cupy

    plan = rms_plan()
    X, W = random_inputs(plan.inputs, seed=5)
    host = CompiledGraph(plan, None).run_host(X, W)[0].astype(np.float64)
    g = CompiledGraph(plan, None, poison_outputs=True).load()
    Xd, Wd = cupy.asarray(X), cupy.asarray(W)
    (O,) = g(Xd, Wd)
    assert O.strides == (2, 8)
    np.testing.assert_allclose(cupy.asnumpy(O).astype(np.float64), host, rtol=2e-2, atol=2e-2)
    gg = CompiledGraph(plan, None, cuda_graph=True, poison_outputs=True).load()
    first = cupy.asnumpy(gg(Xd, Wd)[0])
    second = cupy.asnumpy(gg(Xd, Wd)[0])
    np.testing.assert_array_equal(first, second)
    np.testing.assert_array_equal(first, cupy.asnumpy(O))


GPU_LIB_CASES = [
    (op, {})
    for op in ("exp", "square", "sqrt", "silu", "sigmoid", "gelu", "relu", "log", "add", "mul", "div", "sub", "pow")
] + [("clamp", {"min": 0.3, "max": 0.6}), ("mul_scalar", {"scalar": -1.5})]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float16, np.float32])
@pytest.mark.parametrize("op, params", GPU_LIB_CASES)
def test_gpu_library_ops_match_numpy(op: str, params: dict[str, float], dtype: type) -> None:
    import cupy

    x = np.abs(rand(8, 16, dtype=dtype)) + dtype(0.1)
    y = np.abs(rand(8, 1, dtype=dtype, seed=1)) + dtype(0.1)
    args = [x] if op not in ("add", "mul", "div", "sub", "pow") else [x, y]
    call = LibraryCall(op, (), (), dict(params))
    want = np.empty_like(x)
    run_library_call(call, args, [want], np)
    # a column-major result: the CuPy path writes through strides
    buf = cupy.full(8 * 16, cupy.nan, dtype=dtype)
    got = cupy.lib.stride_tricks.as_strided(buf, (8, 16), (buf.itemsize, 8 * buf.itemsize))
    run_library_call(call, [cupy.asarray(a) for a in args], [got], cupy)
    np.testing.assert_allclose(cupy.asnumpy(got).astype(np.float64), want.astype(np.float64), rtol=2e-3, atol=2e-3)


@pytest.mark.gpu
@pytest.mark.parametrize("size", [1, 4])
def test_gpu_reduction_matches_numpy(size: int) -> None:
    import cupy

    x = rand(3, 16, 5, dtype=np.float16)
    call = LibraryCall("reduction", (), (), {"dim": 1, "size": size})
    want = np.empty((3, size, 5), np.float16)
    run_library_call(call, [x], [want], np)
    got = cupy.empty((3, size, 5), cupy.float16)
    run_library_call(call, [cupy.asarray(x)], [got], cupy)
    np.testing.assert_allclose(cupy.asnumpy(got).astype(np.float64), want.astype(np.float64), rtol=2e-3, atol=2e-3)


@pytest.mark.gpu
def test_gpu_graph_mode_kernel_matmul_kernel(tmp_path: Path) -> None:
    """kernel -> cuBLAS matmul (eager between captured segments) -> kernel, via the workspace."""
    import cupy

    A = spec((16, 16), dtype="float32")
    t0 = TensorRef("workspace", 0, 0, A)
    t1 = TensorRef("workspace", 0, 1024, A)
    plan = LaunchPlan(
        "graph_mix",
        (A, A),
        (A,),
        2048,
        (
            KernelLaunch("scale2", (2, 1, 1), (128, 1, 1), 0, (t0, TensorRef("input", 0))),
            LibraryCall("matmul", (t0, TensorRef("input", 1)), (t1,)),
            KernelLaunch("scale2", (2, 1, 1), (128, 1, 1), 0, (TensorRef("output", 0), t1)),
        ),
    )
    x = cupy.random.uniform(-1, 1, (16, 16)).astype(cupy.float32)
    w = cupy.random.uniform(-1, 1, (16, 16)).astype(cupy.float32)
    want = cupy.asnumpy(4 * (x @ w))
    eager = _tiny_graph(tmp_path, plan)
    np.testing.assert_allclose(cupy.asnumpy(eager(x, w)[0]), want, rtol=1e-4, atol=1e-4)
    gg = _tiny_graph(tmp_path, plan, cuda_graph=True, poison_outputs=True)
    for _ in range(3):
        out = gg(x, w)[0]
    np.testing.assert_allclose(cupy.asnumpy(out), want, rtol=1e-4, atol=1e-4)
    x[:] = 1
    np.testing.assert_allclose(cupy.asnumpy(gg(x, w)[0]), cupy.asnumpy(4 * (x @ w)), rtol=1e-4, atol=1e-4)
    with pytest.raises(LaunchError, match="cannot capture"):
        eager.capture_sweep([[x, w]])


# ---------------------------------------------------------------------------------------
# autotuning over plan ranks


def test_pick_fastest_keeps_the_earlier_on_ties_and_failures() -> None:
    from mirage_xdsl.driver.compile import pick_fastest

    times = {"a": 20.0, "b": None, "c": 12.5, "d": 12.5}
    assert pick_fastest(list("abcd"), times.get) == (2, [20.0, None, 12.5, 12.5])
    assert pick_fastest(list("b"), times.get)[0] == 0  # nothing timed: the cheapest estimate
    assert pick_fastest(list("ba"), times.get)[0] == 1


def test_prepare_candidates_and_autotune_without_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """Plan ranks give different kernels for gated_mlp; `compile(autotune=k)` without a GPU
    is plain `compile` (rank 0, nothing timed)."""
    import mirage_xdsl.driver.compile as ex
    from mirage_xdsl.tools.mirage_run import load_module

    module = load_module(Path(__file__).resolve().parents[1] / "examples" / "gated_mlp.mlir")
    sources = {ex.prepare(module, arch="sm_90", candidate=r).program.source for r in range(3)}
    assert len(sources) == 3
    monkeypatch.setattr(ex, "gpu_available", lambda: False)
    monkeypatch.setattr(ex, "_autotuned", lambda *a, **k: pytest.fail("autotuned without a GPU"))
    monkeypatch.setattr(ex, "_compiled", lambda prepared, *a: prepared)
    chosen = ex.compile(module, arch="sm_90", autotune=4)
    assert chosen.program.source == ex.prepare(module, arch="sm_90").program.source


@pytest.mark.gpu
def test_gpu_grid_sum_kernel_rearms_its_counters() -> None:
    """A split-K kernel combined in the kernel (tb.grid_sum): correct on fresh inputs with
    poisoned outputs, call after call, eagerly and in CUDA-graph mode -- so every launch left
    the arrival counters at zero -- and the counters are zero afterwards."""
    _needs_compiler()
    import cupy
    from xdsl.parser import Parser

    from mirage_xdsl.driver.compile import compile as compile_graph
    from mirage_xdsl.driver.compile import make_context
    from mirage_xdsl.reference.executor import run_reference

    text = (Path(__file__).parent / "data" / "split_k_grid_sum.mlir").read_text()
    module = Parser(make_context(), text).parse_module()
    for cuda_graph in (False, True):
        g = compile_graph(module.clone(), cuda_graph=cuda_graph, poison_outputs=True)
        assert g.plan.counters >= 2  # one arrival counter per column tile, plus the late finisher's partner words
        for seed in range(3):
            X, W = random_inputs(g.plan.inputs, seed=seed)
            (ref,) = run_reference(module, [X.astype(np.float64), W.astype(np.float64)])
            (out,) = g(cupy.asarray(X), cupy.asarray(W))
            assert _rel_err([cupy.asnumpy(out).astype(np.float64)], [ref]) < 1e-2
        assert not cupy.asnumpy(g._counters).any()


def _check_six_back_to_back(g: Any, module: Any) -> None:
    """Six launches of the single-output graph `g` back to back in one CUDA graph (each
    overlapping the previous one's end under PDL), on fresh inputs with NaN-poisoned outputs,
    match the reference of `module`, replay after replay."""
    import cupy

    from mirage_xdsl.reference.executor import run_reference

    sets = [random_inputs(g.plan.inputs, seed=int.from_bytes(os.urandom(4), "little")) for _ in range(6)]
    refs = [run_reference(module, [x.astype(np.float64) for x in xs])[0] for xs in sets]
    launch = g.capture_sweep([[cupy.asarray(x) for x in xs] for xs in sets])
    for _ in range(2):
        for (out,) in launch.outputs:
            out.fill(cupy.nan)
        launch()
        cupy.cuda.get_current_stream().synchronize()
        for (out,), ref in zip(launch.outputs, refs):
            assert _rel_err([cupy.asnumpy(out).astype(np.float64)], [ref]) < 1e-2


@pytest.mark.gpu
@pytest.mark.parametrize("stages", [2, 4, 6, 8])
@pytest.mark.parametrize("shift", [1, 2, 3])
def test_gpu_late_finisher_stage_shift_grid(stages: int, shift: int) -> None:
    """rmsnorm_linear's split-K plan with a late finisher at every cp.async depth and shift:
    correct, never an illegal instruction (c0s8xrf1, c0s8xrf2 and c0s4xrf2 faulted while the
    weight loads carried an L2 evict_first policy; see passes/cute/late_finisher.py)."""
    _needs_compiler()
    import cupy

    from mirage_xdsl.driver.compile import compile as compile_graph
    from mirage_xdsl.driver.compile import prepare
    from mirage_xdsl.driver.load import load_module
    from mirage_xdsl.driver.tune.space import genome_from_label
    from mirage_xdsl.reference.executor import run_reference

    module = load_module(Path(__file__).parents[1] / "examples" / "rmsnorm_linear.mlir")
    options = genome_from_label(f"c0s{stages}xrf{shift}").options()
    g = compile_graph(prepare(module, None, None, options=options).module, poison_outputs=True)
    X, W = random_inputs(g.plan.inputs, seed=int.from_bytes(os.urandom(4), "little"))
    (out,) = g(cupy.asarray(X), cupy.asarray(W))
    (ref,) = run_reference(module, [X.astype(np.float64), W.astype(np.float64)])
    assert _rel_err([cupy.asnumpy(out).astype(np.float64)], [ref]) < 1e-2


@pytest.mark.gpu
def test_gpu_late_finisher_split_k() -> None:
    """rms_norm(X) @ W of rmsnorm bs8 (X [16, 4096], W [4096, 6144] fp16) as the split-K plan
    whose groups a late finisher combines (variant c0s7xrf1: partners 15 iterations, the
    finisher 19, partner words in the counter buffer) with the sum of squares on the tensor
    cores: correct on fresh inputs with NaN-poisoned outputs, call after call, eagerly and in
    CUDA-graph mode, the partner words zero again after every call; and six launches back to
    back in one CUDA graph (each overlapping the previous one's end under PDL) match too."""
    _needs_compiler()
    import cupy
    from xdsl.dialects.builtin import ModuleOp
    from xdsl.parser import Parser

    from mirage_xdsl.bench.prepare import parse_variant
    from mirage_xdsl.driver.compile import compile as compile_graph
    from mirage_xdsl.driver.compile import make_context
    from mirage_xdsl.passes.pipeline import MirageTranspilePass
    from mirage_xdsl.reference.executor import run_reference

    text = (Path(__file__).parents[1] / "examples" / "rmsnorm_linear_bs8.mlir").read_text()
    module = Parser(make_context(), text).parse_module()
    lowered = ModuleOp([next(iter(module.ops)).clone()])
    MirageTranspilePass.from_options(parse_variant("c0s7xrf1")).apply(make_context(), lowered)
    for cuda_graph in (False, True):
        g = compile_graph(lowered.clone(), cuda_graph=cuda_graph, poison_outputs=True)
        assert "gw1.wait(" in g.source and "SquareSumMma" in g.source and g.plan.counters == 96 * 3 * 1040
        for _ in range(3):
            X, W = random_inputs(g.plan.inputs, seed=int.from_bytes(os.urandom(4), "little"))
            (ref,) = run_reference(module, [X.astype(np.float64), W.astype(np.float64)])
            (out,) = g(cupy.asarray(X), cupy.asarray(W))
            assert _rel_err([cupy.asnumpy(out).astype(np.float64)], [ref]) < 1e-2
            assert not cupy.asnumpy(g._counters).any()
    _check_six_back_to_back(g, module)
    assert not cupy.asnumpy(g._counters).any()


@pytest.mark.gpu
def test_gpu_weight_prefetch_back_to_back() -> None:
    """A kernel that streams a kn.weight input prefetches it before its PDL wait and lets the
    next grid launch at its start: six such launches back to back in one CUDA graph (each
    overlapping the previous one's end) all match the reference, on fresh inputs with
    NaN-poisoned outputs, replay after replay."""
    _needs_compiler()
    from xdsl.parser import Parser

    from mirage_xdsl.driver.compile import compile as compile_graph
    from mirage_xdsl.driver.compile import make_context

    text = (Path(__file__).parents[1] / "examples" / "rmsnorm_linear_bs8.mlir").read_text()
    module = Parser(make_context(), text).parse_module()
    g = compile_graph(module.clone())
    assert "mx::allow_dependent_launch();" in g.source and all(s.one_wave for s in g.plan.steps)
    _check_six_back_to_back(g, module)


@pytest.mark.gpu
def test_gpu_register_chain_attention() -> None:
    """Attention whose P = exp(Q @ K) stays in registers (cute.mma_chain, the warps splitting
    the keys of P @ V): correct on fresh inputs with poisoned outputs, eagerly and in
    CUDA-graph mode."""
    _needs_compiler()
    import cupy
    from xdsl.parser import Parser

    from mirage_xdsl.driver.compile import compile as compile_graph
    from mirage_xdsl.driver.compile import make_context
    from mirage_xdsl.reference.executor import run_reference

    text = (Path(__file__).parent / "filecheck" / "codegen" / "register-chain.mlir").read_text()
    module = Parser(make_context(), text).parse_module()
    for cuda_graph in (False, True):
        g = compile_graph(module.clone(), cuda_graph=cuda_graph, poison_outputs=True)
        assert "mma_chain_run" in g.source
        for seed in range(3):
            inputs = [0.3 * x for x in random_inputs(g.plan.inputs, seed=seed)]
            (ref,) = run_reference(module, [x.astype(np.float64) for x in inputs])
            (out,) = g(*[cupy.asarray(x) for x in inputs])
            assert _rel_err([cupy.asnumpy(out).astype(np.float64)], [ref]) < 1e-2
