"""Input and plan validation (runtime/validate.py): describing numpy and torch-like tensors,
input count, shape, dtype and strides, the shared-memory and thread limits of a plan, its
workspace and counter references, allocation sizes and seeded random inputs."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from runtime_plans import kernel_plan, rms_plan, spec

from mirage_xdsl.codegen.launch_plan import LaunchPlan, LibraryCall, TensorRef, TensorSpec
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


def test_laid_out_gives_back_a_pickled_inputs_strides() -> None:
    """A transposed input (strides (1, 4) for [4, 3]) crosses a process boundary contiguous;
    `laid_out` gives it the plan's strides back with the same values, padding zero."""
    import pickle

    import numpy as np

    from mirage_xdsl.codegen.launch_plan import TensorSpec
    from mirage_xdsl.runtime.random_inputs import laid_out, random_inputs

    (x,) = random_inputs([TensorSpec((4, 3), (1, 5), "float16")], seed=3)
    moved = pickle.loads(pickle.dumps(x))
    assert moved.strides == (6, 2)  # contiguous now
    back = laid_out(moved, (1, 5))
    assert back.strides == (2, 10) and back.dtype == np.float16
    np.testing.assert_array_equal(back, x)
