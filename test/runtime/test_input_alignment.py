"""Input alignment (issue #29 item 5): a device input whose data pointer is not 16-byte
aligned is refused with an `InputError` naming it, its offset and the fix.

CPU tests use a fake CuPy array (the attributes `describe` and the call's fast path read);
the `gpu` test makes a real misaligned CuPy view by slicing.  Aliasing of outputs and inputs
cannot happen (the runtime allocates every output; there is no `out=`), see
runtime/executable.py's docstring.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from mirage_xdsl.codegen.launch_plan import LaunchPlan, LibraryCall, TensorRef, TensorSpec
from mirage_xdsl.runtime import executable
from mirage_xdsl.runtime.executable import CompiledGraph
from mirage_xdsl.runtime.validate import VECTOR_BYTES, InputError, check_inputs, describe

SHAPE = (4, 8)


def exp_plan() -> LaunchPlan:
    """`O = exp(X)` for a 4x8 float16 X, as one library call (no kernel, no cubin)."""
    x = TensorSpec(SHAPE, (8, 1), "float16")
    return LaunchPlan("graph_exp", (x,), (x,), 0, (LibraryCall("exp", (TensorRef("input", 0),), (TensorRef("output", 0),)),))


class FakeCupyArray:
    """What `describe` and `CompiledGraph._fast_inputs` read of a CuPy array."""

    def __init__(self, pointer: int, shape: tuple[int, ...] = SHAPE, dtype: Any = np.float16) -> None:
        self.shape = shape
        self.dtype = np.dtype(dtype)
        self.strides = tuple(s * self.dtype.itemsize for s in (shape[1], 1))
        self.device = SimpleNamespace(id=0)
        self.data = SimpleNamespace(ptr=pointer)


FakeCupyArray.__module__ = "cupy._core.core"

MISALIGNED_MESSAGE = (
    "input 0 (X): data pointer is 2 bytes past a 16-byte boundary (a view at an offset into its buffer); "
    "the kernels load inputs with 16-byte cp.async, so pass a copy in a fresh buffer "
    "(x.copy(); .contiguous() / cupy.ascontiguousarray keep a contiguous view where it is)"
)


def test_describe_records_the_pointer_offset() -> None:
    assert VECTOR_BYTES == 16
    assert describe(FakeCupyArray(0x7F0000000000)).misalignment == 0
    assert describe(FakeCupyArray(0x7F0000000002)).misalignment == 2
    info = describe(FakeCupyArray(0x7F000000000A))
    assert (info.framework, info.device, info.strides, info.misalignment) == ("cupy", 0, (8, 1), 10)


def test_misaligned_device_input_is_refused_with_the_fix() -> None:
    plan = exp_plan()
    check_inputs(plan, [describe(FakeCupyArray(0x7F0000000010))], ["X"], require_gpu=True)
    with pytest.raises(InputError) as err:
        check_inputs(plan, [describe(FakeCupyArray(0x7F0000000002))], ["X"], require_gpu=True)
    assert str(err.value) == MISALIGNED_MESSAGE


def test_misaligned_torch_tensor_names_clone() -> None:
    class FakeTorch:
        shape = SHAPE
        dtype = "torch.float16"
        is_cuda = True
        device = SimpleNamespace(index=0)

        def stride(self) -> tuple[int, int]:
            return (8, 1)

        def data_ptr(self) -> int:
            return 0x7F0000000008

    FakeTorch.__module__ = "torch.fake"
    info = describe(FakeTorch())
    assert info.misalignment == 8
    with pytest.raises(InputError, match=r"input 0: data pointer is 8 bytes past .* \(x\.clone\(\);"):
        check_inputs(exp_plan(), [info], require_gpu=True)


def test_host_arrays_are_not_checked_for_alignment() -> None:
    """numpy inputs of `run_host` never reach cp.async: an odd view is fine there."""
    buf = np.zeros(33, np.float16)
    view = buf[1:].reshape(SHAPE)
    assert describe(view).misalignment == (buf.ctypes.data + 2) % VECTOR_BYTES
    check_inputs(exp_plan(), [describe(view)])
    (out,) = CompiledGraph(exp_plan(), None).run_host(view)
    assert np.allclose(out, 1.0)


def _fake_cupy() -> Any:
    cuda = SimpleNamespace(runtime=SimpleNamespace(getDevice=lambda: 0), get_current_stream=lambda: None)
    return SimpleNamespace(ndarray=FakeCupyArray, cuda=cuda)


def test_call_refuses_misaligned_input_before_any_launch(monkeypatch: pytest.MonkeyPatch) -> None:
    """The call's fast path (CuPy arrays exactly as compiled) must not let a misaligned view
    through: it falls back to the full check, which names it."""
    graph = CompiledGraph(exp_plan(), None, input_names=["X"])
    graph._module, graph._device = True, 0  # as if loaded on device 0
    monkeypatch.setattr(executable, "import_cupy", _fake_cupy)
    launched: list[Any] = []
    monkeypatch.setattr(graph, "_run", lambda *args: launched.append(args) or [])
    assert graph._fast_inputs(_fake_cupy(), [FakeCupyArray(0x7F0000000100)]) is not None
    assert graph._fast_inputs(_fake_cupy(), [FakeCupyArray(0x7F0000000102)]) is None
    with pytest.raises(InputError) as err:
        graph(FakeCupyArray(0x7F0000000102))
    assert str(err.value) == MISALIGNED_MESSAGE and not launched
    graph(FakeCupyArray(0x7F0000000100))
    assert len(launched) == 1


def test_empty_inputs_are_not_checked() -> None:
    x = TensorSpec((0, 8), (8, 1), "float16")
    plan = LaunchPlan("graph_empty", (x,), (x,), 0, ())
    check_inputs(plan, [describe(FakeCupyArray(0x7F0000000002, shape=(0, 8)))], require_gpu=True)


@pytest.mark.gpu
def test_gpu_misaligned_cupy_view_is_refused() -> None:
    import cupy

    graph = CompiledGraph(exp_plan(), None, input_names=["X"]).load()
    buf = cupy.zeros(64, dtype=cupy.float16)
    misaligned = buf.ravel()[1:33].reshape(SHAPE)  # 2 bytes into the buffer, still contiguous
    with pytest.raises(InputError) as err:
        graph(misaligned)
    assert str(err.value) == MISALIGNED_MESSAGE
    assert cupy.ascontiguousarray(misaligned).data.ptr == misaligned.data.ptr  # why the message says copy
    aligned = buf.ravel()[8:40].reshape(SHAPE)  # 16 bytes in: accepted
    (out,) = graph(aligned)
    assert cupy.allclose(out, 1.0)
    (out,) = graph(misaligned.copy())
    assert cupy.allclose(out, 1.0)
