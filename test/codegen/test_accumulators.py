"""Numbers of every `tb.forloop_accum` kind over several iterations, and the storage of the
loop-carried running max of `tb.reduction_max` (issue: a shared-memory plan that gave the
running max and `exp(diff)` one offset, so the max did not survive to the next iteration).

The generated CUDA runs in the host emulator (`runtime/host_emulator.py`) on fresh random
inputs and is compared with the numpy reference executor; the same graphs run on the GPU
under the `gpu` marker with NaN-poisoned outputs.
"""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest
from conftest import has_gpu
from xdsl.dialects.builtin import ModuleOp

ITERS = 4
GRID = 2
ROWS = 8
COLS = 64


def _graph(kind: str, dtype: str) -> ModuleOp:
    """X [GRID*ROWS, ITERS*COLS] read in [ROWS, COLS] tiles; one accumulator of `kind` over
    ITERS iterations, its result the output. The rescale kinds take `exp(diff)` of a running
    max as in online softmax, with the max itself unused in the loop (the case whose storage
    was reused)."""
    from mirage_xdsl.frontends.builder import new_kernel_graph
    from mirage_xdsl.frontends.tb_builder import new_threadblock_graph

    g = new_kernel_graph("acc")
    X = g.new_input(dims=(GRID * ROWS, ITERS * COLS), dtype=dtype)
    tb = new_threadblock_graph(grid_dim=(GRID, 1, 1), forloop_range=ITERS)
    x = tb.new_input(X, input_map=(0, -1, -1), forloop_dim=1)
    if kind in ("rescale", "rescale_sum"):
        _, diff = tb.reduction_max(x, 1)
        acc = tb.forloop_accum_rescale(x, tb.exp(diff), "sum" if kind == "rescale_sum" else None)
    elif kind == "max":
        acc = tb.forloop_accum_max(x)
    elif kind == "softmax":
        # the running max used inside the loop and the rescaled sums divided after it
        m, diff = tb.reduction_max(x, 1)
        e = tb.exp(tb.sub(x, m))
        r = tb.exp(diff)
        acc = tb.div(tb.forloop_accum_rescale(e, r), tb.forloop_accum_rescale(e, r, "sum"))
    else:
        acc = tb.forloop_accum(x, None if kind == "nored" else kind)
    tb.new_output(acc, output_map=(0, -1, -1))
    (out,) = g.customized([X], tb)
    g.mark_output(out)
    return g.module


KINDS = ["nored", "sum", "mean", "rms", "sum_todimx", "max", "rescale", "rescale_sum", "softmax"]


def _inputs(shape: tuple[int, ...], dtype: str, seed: int) -> np.ndarray:
    # values up to +-4 so that exp() and the running max move between iterations
    return np.random.default_rng(seed).uniform(-4.0, 4.0, size=shape).astype(dtype)


def _rel_err(out: np.ndarray, ref: np.ndarray) -> float:
    return float(np.abs(out.astype(np.float64) - ref).max() / max(np.abs(ref).max(), 1e-6))


def test_running_max_lives_through_the_loop() -> None:
    """The running max of a reduction_max whose max has no consumer still owns its buffer
    from before the loop to the loop's end, and nothing live in the loop shares it."""
    from mirage_xdsl.driver.compile import make_context
    from mirage_xdsl.passes.pipeline import MirageTranspilePass

    module = _graph("rescale", "float16")
    MirageTranspilePass(to_cute=False).apply(make_context(), module)
    ops = [o for o in module.walk() if o.name.startswith("tb.")]
    rmax = next(o for o in ops if o.name == "tb.reduction_max")
    max_off = rmax.attributes["tb.smem_offset"].get_values()[0]  # type: ignore[union-attr]
    max_bytes = ROWS * 2
    for o in ops:
        if o is rmax or o.attributes.get("tb.stage") is None or o.attributes["tb.stage"].data != "loop":  # type: ignore[union-attr]
            continue
        offs = o.attributes.get("tb.smem_offset")
        for off in offs.get_values() if offs is not None else ():  # type: ignore[union-attr]
            assert off < 0 or not (off < max_off + max_bytes and max_off < off + 16), (
                f"{o.name} at {off} overlaps the running max at {max_off}"
            )


@pytest.mark.parametrize("dtype", ["float16", "float32"])
@pytest.mark.parametrize("kind", KINDS)
def test_accumulator_emulated(kind: str, dtype: str) -> None:
    from mirage_xdsl.runtime.host_emulator import HostEmulator, find_cxx

    if find_cxx() is None:
        pytest.skip("no host C++ compiler")
    from mirage_xdsl.codegen.cuda_target import emit_cuda
    from mirage_xdsl.driver.compile import make_context
    from mirage_xdsl.passes.pipeline import MirageTranspilePass
    from mirage_xdsl.reference.executor import run_reference

    module = _graph(kind, dtype)
    lowered = module.clone()
    MirageTranspilePass().apply(make_context(), lowered)
    program = emit_cuda(lowered)
    (spec,) = program.plans["acc"].inputs
    x = _inputs(spec.shape, dtype, int.from_bytes(os.urandom(4), "little"))
    (out,) = HostEmulator(program).run("acc", [x])
    (ref,) = run_reference(module, [x.astype(np.float64)])
    assert out.shape == ref.shape
    assert not np.isnan(out).any()
    tol = 1e-4 if dtype == "float32" else 1e-2
    assert _rel_err(out, ref) < tol, f"{kind} {dtype}: max rel error {_rel_err(out, ref):.3g}"


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "float32"])
@pytest.mark.parametrize("kind", KINDS)
def test_gpu_accumulator(kind: str, dtype: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    if not has_gpu() or shutil.which("nvcc") is None:
        pytest.skip("needs a GPU and nvcc")
    import cupy

    import mirage_xdsl
    from mirage_xdsl.reference.executor import run_reference

    module = _graph(kind, dtype)
    g = mirage_xdsl.compile(module, "acc", poison_outputs=True, cache_dir=tmp_path_factory.getbasetemp() / "cubins")
    for _ in range(2):  # fresh inputs each call; the outputs are NaN-poisoned before each launch
        (spec,) = g.plan.inputs
        x = _inputs(spec.shape, dtype, int.from_bytes(os.urandom(4), "little"))
        (out,) = g(cupy.asarray(x))
        host = cupy.asnumpy(out)
        (ref,) = run_reference(module, [x.astype(np.float64)])
        assert not np.isnan(host).any()
        tol = 1e-4 if dtype == "float32" else 1e-2
        assert _rel_err(host, ref) < tol, f"{kind} {dtype}: max rel error {_rel_err(host, ref):.3g}"
