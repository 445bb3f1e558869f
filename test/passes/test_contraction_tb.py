"""convert-contraction-to-tb: scheduled contractions as threadblock graphs (the mma.sync path),
run on the host emulator (and, with a GPU, on the device) against the reference executor."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.utils.exceptions import PassFailedException

from mirage_xdsl.codegen.cuda_target import emit_cuda
from mirage_xdsl.dialects import kn
from mirage_xdsl.driver.compile import make_context, prepare
from mirage_xdsl.frontends.einsum import einsum_module
from mirage_xdsl.passes.contraction.passes import MakeExecutablePass
from mirage_xdsl.passes.contraction.to_tb import ConvertContractionToTbPass
from mirage_xdsl.reference.executor import run_function
from mirage_xdsl.runtime.host_emulator import HostEmulator, find_cxx


def lowered(equation: str, shapes: list[tuple[int, ...]], dtype: str = "float16"):  # type: ignore[no-untyped-def]
    module = einsum_module(equation, shapes, dtype)
    ctx = make_context()
    MakeExecutablePass().apply(ctx, module)
    ConvertContractionToTbPass().apply(ctx, module)
    module.verify()
    return module


def reference(equation: str, shapes: list[tuple[int, ...]], dtype: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    (out,) = run_function(einsum_module(equation, shapes, dtype).body.block.first_op, [a, b])
    return out


def test_schedule_becomes_grid_loop_and_tile() -> None:
    module = lowered("cmk,ckn->cmn", [(2, 64, 128), (2, 128, 96)])
    (op,) = [o for o in module.walk() if isinstance(o, kn.CustomizedOp)]
    # make-executable: PRIM 64 x 32 x 128, so N/32 = 3 tiles on x, M/64 = 1 on y, C = 2 on z
    assert op.grid == (3, 1, 2) and op.forloop_range.value.data == 1
    names = [o.name for o in op.body.block.ops]
    assert names == ["tb.input", "tb.input", "tb.matmul", "tb.forloop_accum", "tb.output"]


def test_rejections_name_the_rule() -> None:
    module = einsum_module("cmk,ckn->cmn", [(2, 64, 128), (2, 128, 96)])
    with pytest.raises(PassFailedException, match="run contraction-make-executable first"):
        ConvertContractionToTbPass().apply(make_context(), module)
    with pytest.raises(PassFailedException, match="row-major"):
        lowered("abcd,cde->abe", [(2, 4, 8, 16), (8, 16, 32)])
    with pytest.raises(PassFailedException, match="B contiguous along N"):
        lowered("mk,nk->mn", [(64, 64), (64, 64)])


CASES = [
    ("cmk,ckn->cmn", [(2, 64, 128), (2, 128, 96)], "float16"),
    ("mk,kn->mn", [(32, 256), (256, 64)], "float16"),
    ("cmk,ckn->cmn", [(3, 32, 64), (3, 64, 32)], "bfloat16"),
]


@pytest.mark.skipif(find_cxx() is None, reason="needs a C++ compiler")
@pytest.mark.parametrize(("equation", "shapes", "dtype"), CASES)
def test_emulated_matches_reference(equation: str, shapes: list[tuple[int, ...]], dtype: str) -> None:
    rng = np.random.default_rng(3)
    a, b = (rng.standard_normal(s).astype(np.float32) for s in shapes)
    program = emit_cuda(prepare(lowered(equation, shapes, dtype), arch="sm_80").module, "sm_80")
    (out,) = HostEmulator(program).run("einsum", [a, b])
    ref = reference(equation, shapes, dtype, a, b)
    tol = 3e-2 if dtype == "bfloat16" else 5e-3
    np.testing.assert_allclose(np.asarray(out, np.float64), ref, atol=tol * np.abs(ref).max(), rtol=tol)


@pytest.mark.gpu
@pytest.mark.parametrize(("equation", "shapes", "dtype"), CASES[:2])
def test_gpu_matches_reference(equation: str, shapes: list[tuple[int, ...]], dtype: str) -> None:
    import cupy

    import mirage_xdsl as mx

    rng = np.random.default_rng(4)
    a, b = (rng.standard_normal(s).astype(np.float16) for s in shapes)
    graph = mx.compile(lowered(equation, shapes, dtype), poison_outputs=True)
    (out,) = graph(cupy.asarray(a), cupy.asarray(b))
    ref = reference(equation, shapes, dtype, a.astype(np.float64), b.astype(np.float64))
    got = cupy.asnumpy(out).astype(np.float64)
    np.testing.assert_allclose(got, ref, atol=5e-3 * np.abs(ref).max(), rtol=5e-3)
