"""Launch plans and a tiny CUDA kernel that the runtime tests share."""

from __future__ import annotations

from mirage_xdsl.codegen.launch_plan import KernelLaunch, LaunchPlan, LibraryCall, TensorRef, TensorSpec
from mirage_xdsl.runtime.validate import contiguous_strides

TINY_KERNEL = r"""
extern "C" __global__ void scale2(float* out, const float* in) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;  // launched with exactly one thread per element
  out[i] = 2.0f * in[i];
}
"""


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
