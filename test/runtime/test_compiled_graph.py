"""CompiledGraph: launch plans (PDL, one-wave launches, the cuLaunchKernelEx structs), plans run
on the host (workspace, strided outputs, poisoned outputs, CUDA-graph segments) and, on a GPU,
kernel launches (eager, CUDA graph, torch inputs, streams, programmatic launch, large shared
memory, bad launches) and library plans against the host and under graph replay."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from conftest import has_gpu
from runtime_plans import TINY_KERNEL, kernel_plan, rms_plan, spec

from mirage_xdsl.codegen.launch_plan import KernelLaunch, LaunchPlan, LibraryCall, TensorRef
from mirage_xdsl.driver.nvcc import compile_cuda, find_nvcc
from mirage_xdsl.runtime.executable import CompiledGraph, graph_segments
from mirage_xdsl.runtime.random_inputs import random_inputs
from mirage_xdsl.runtime.validate import InputError, LaunchError, describe


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
# GPU tests


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
