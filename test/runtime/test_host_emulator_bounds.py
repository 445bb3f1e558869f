"""The host emulator stops a kernel that leaves its memory, as the GPU would (illegal address)
or would not (a global store just past a buffer): shared memory past the launch's size and
guard bytes around every global buffer (runtime/host_emulator.py, `mxh::launch_checked`)."""

from __future__ import annotations

import numpy as np
import pytest

from mirage_xdsl.codegen.cuda_target import CudaProgram
from mirage_xdsl.codegen.launch_plan import KernelLaunch, LaunchPlan, TensorRef, TensorSpec
from mirage_xdsl.runtime.host_emulator import HostEmulationError, HostEmulator, find_cxx

pytestmark = pytest.mark.skipif(find_cxx() is None, reason="no host C++ compiler")

_KERNEL = """#include "mirage_xdsl/runtime.cuh"
extern "C" __global__ void __launch_bounds__(32) probe(
    float* o0,
    const float* i0) {{
  extern __shared__ __align__(128) unsigned char smem[];
  const int tid = threadIdx.x;
  float* s = reinterpret_cast<float*>(smem + 128);
  s[tid] = i0[tid];
  __syncthreads();
  {body}
}}
"""

SMEM_BYTES = 256  # the header and 32 floats


def _run(body: str) -> np.ndarray:
    spec = TensorSpec(shape=(32,), strides=(1,), dtype="float32")
    launch = KernelLaunch(
        kernel="probe",
        grid=(1, 1, 1),
        block=(32, 1, 1),
        smem_bytes=SMEM_BYTES,
        args=(TensorRef(kind="output", index=0), TensorRef(kind="input", index=0)),
    )
    plan = LaunchPlan(func_name="probe", inputs=(spec,), outputs=(spec,), workspace_bytes=0, steps=(launch,))
    program = CudaProgram(_KERNEL.format(body=body), {"probe": plan})
    (out,) = HostEmulator(program).run("probe", [np.arange(32, dtype=np.float32)])
    return out


def test_a_kernel_inside_its_memory_runs() -> None:
    """The control: every access in bounds, the result as written."""
    np.testing.assert_array_equal(_run("o0[tid] = 2.0f * s[31 - tid];"), 2.0 * np.arange(32)[::-1])


def test_a_shared_store_past_the_launch_size_is_an_error() -> None:
    """One float past the 256 bytes asked for (the bug of a one-warp block reduction's scratch)."""
    with pytest.raises(HostEmulationError, match="wrote shared memory at byte 256, past the 256 bytes"):
        _run("if (tid == 0) s[32] = 1.0f; o0[tid] = s[tid];")


def test_a_shared_load_pages_beyond_the_launch_size_is_an_error() -> None:
    """A read a page or more past the size faults (the page is made inaccessible)."""
    with pytest.raises(HostEmulationError, match=r"touched shared memory at byte \d+, past the 256 bytes"):
        _run("o0[tid] = s[tid + 8192];")


@pytest.mark.parametrize(
    ("store", "message"),
    [
        # the 16 bytes of slack after a buffer are the allocation's; a store past them hits the guard
        ("o0[40] = 1.0f;", r"wrote 4 guard byte\(s\) after output 0's buffer, the nearest 17 byte\(s\) from it"),
        ("o0[-1] = 1.0f;", r"wrote 4 guard byte\(s\) before output 0's buffer, the nearest 1 byte\(s\) from it"),
    ],
)
def test_a_global_store_outside_an_output_is_an_error(store: str, message: str) -> None:
    """A store just past or just before an output's buffer lands in its guard fill."""
    with pytest.raises(HostEmulationError, match=message):
        _run(f"o0[tid] = s[tid]; if (tid == 0) {store}")


def test_a_global_load_past_an_input_is_an_error() -> None:
    """A read past the 128-byte rounding after an input faults (the page after each buffer is inaccessible)."""
    with pytest.raises(HostEmulationError, match=r"faulted \d+ byte\(s\) past the end of input 0's buffer"):
        _run("o0[tid] = i0[tid + 100];")
