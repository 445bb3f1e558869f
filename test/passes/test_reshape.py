"""`kn.reshape` (issue #32, the decoder layer's heads): the op and its verifier, the builder,
the view rule (`dialects/views.reshape_strides` against numpy), `kn-alias-reshape`, the
per-kernel pipeline (views, and the copy where no view exists) on the host emulator, and the
megakernel's dependencies across a reshape.  GPU tests (`-m gpu`): the per-kernel pipeline
and the megakernel against the reference on fresh inputs with NaN-poisoned outputs."""

from __future__ import annotations

import math

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp

import mirage_xdsl as mx
from mirage_xdsl.codegen.cuda_target import emit_cuda
from mirage_xdsl.codegen.launch_plan import KernelLaunch, LibraryCall
from mirage_xdsl.dialects import kn
from mirage_xdsl.dialects.mpk import MpkVerifyError, TaskGraphOp
from mirage_xdsl.dialects.views import offset_range_box, reshape_strides
from mirage_xdsl.driver.compile import make_context
from mirage_xdsl.frontends.builder_common import GraphBuildError
from mirage_xdsl.passes.mpk.pipeline import MirageMegakernelPass
from mirage_xdsl.passes.pipeline import MirageTranspilePass
from mirage_xdsl.reference.executor import run_reference


def attention_layer(kv_heads: int = 2, group: int = 2, head_dim: int = 64, kv_len: int = 128, hidden: int = 256) -> ModuleOp:
    """x [1, hidden] -> rms_norm -> @ Wq -> reshape [kv_heads, group, head_dim] -> stable
    decode attention over K, V -> reshape [1, q width] -> @ Wo + x: both reshapes views."""
    width = kv_heads * group * head_dim
    g = mx.new_kernel_graph("attn")
    x = g.new_input((1, hidden), name="x")
    wq = g.new_input((hidden, width), name="Wq", weight=True)
    K = g.new_input((kv_heads, head_dim, kv_len), strides=(kv_len * head_dim, 1, head_dim), name="K")
    V = g.new_input((kv_heads, kv_len, head_dim), name="V")
    wo = g.new_input((width, hidden), name="Wo", weight=True)
    q = g.reshape(g.matmul(g.rms_norm(x, (hidden,)), wq), (kv_heads, group, head_dim))
    s = g.mul_scalar(g.matmul(q, K), 1.0 / math.sqrt(head_dim))
    e = g.exp(g.sub(s, g.reduction_max(s, 2)))
    o = g.div(g.matmul(e, V), g.reduction(e, 2))
    g.mark_output(g.add(x, g.matmul(g.reshape(o, (1, width)), wo)))
    return g.module


def copy_graph() -> ModuleOp:
    """A reshape with no view (a column-major input) feeding a kernel, and one returned (the
    relu kernel writes straight into that output, viewed: `kn.output_view`)."""
    g = mx.new_kernel_graph("copies")
    c = g.new_input((8, 128), strides=(1, 8), name="C")
    w = g.new_input((128, 64), name="W")
    flat = g.reshape(c, (4, 256))
    g.mark_output(g.matmul(g.relu(g.reshape(flat, (8, 128))), w))
    g.mark_output(g.reshape(g.relu(c), (1024,)))
    return g.module


# --- the op, the builder and the view rule ---------------------------------------------------


def test_reshape_round_trips_and_verifies() -> None:
    from xdsl.parser import Parser

    src = """func.func @f(%x: tensor<1x4096xf16>) -> tensor<8x4x128xf16> {
  %r = kn.reshape %x : tensor<1x4096xf16> -> tensor<8x4x128xf16>
  func.return %r : tensor<8x4x128xf16>
}"""
    module = Parser(make_context(), src).parse_module()
    module.verify()
    assert "kn.reshape %x : tensor<1x4096xf16> -> tensor<8x4x128xf16>" in str(module)
    bad = Parser(make_context(), src.replace("8x4x128", "8x4x64")).parse_module()
    with pytest.raises(Exception, match=r"kn.reshape: cannot reshape \[1, 4096\] \(4096 elements\) into \[8, 4, 64\]"):
        bad.verify()


def test_builder_reshape_checks_the_element_count() -> None:
    g = mx.new_kernel_graph("b")
    x = g.new_input((2, 6))
    g.mark_output(g.reshape(x, (3, 4)))
    assert "kn.reshape" in str(g.module)
    with pytest.raises(GraphBuildError, match=r"reshape: cannot reshape \[2, 6\] \(12 elements\) into \[5, 2\]"):
        g.reshape(x, (5, 2))
    with pytest.raises(GraphBuildError, match="positive"):
        g.reshape(x, (0, 12))


@pytest.mark.parametrize("seed", range(200))
def test_reshape_strides_agree_with_numpy(seed: int) -> None:
    rng = np.random.default_rng(seed)
    rank = int(rng.integers(1, 4))
    shape = tuple(int(s) for s in rng.choice([1, 2, 3, 4, 6], size=rank))
    base = np.arange(math.prod(shape) * 4).reshape(*shape, 4)
    # a strided view: a slice of the last dim, maybe a transpose
    view = base[..., int(rng.integers(0, 4))]
    if rank > 1 and rng.random() < 0.4:
        view = view.swapaxes(0, rank - 1)
    new = list(view.shape)
    rng.shuffle(new)
    n = math.prod(new)
    factors = [d for d in range(1, n + 1) if n % d == 0]
    a = int(rng.choice(factors))
    new_shape = (a, n // a) if rng.random() < 0.5 else tuple(new)
    strides = tuple(s // view.itemsize for s in view.strides)
    got = reshape_strides(view.shape, strides, new_shape)
    try:
        ref = view.view()
        ref.shape = new_shape  # numpy raises when the reshape needs a copy
    except AttributeError:
        ref = None
    if got is None:
        assert ref is None, (view.shape, strides, new_shape)
        return
    out = np.lib.stride_tricks.as_strided(view, new_shape, [s * view.itemsize for s in got])
    assert np.array_equal(out, view.reshape(new_shape))


def test_offset_range_box_holds_the_range() -> None:
    shape, strides = (3, 4, 5), (20, 5, 1)
    for first in range(60):
        for last in range(first, 60, 7):
            box = offset_range_box(shape, strides, first, last)
            for off in range(first, last + 1):
                c = np.unravel_index(off, shape)
                assert all(lo <= ci < hi for ci, (lo, hi) in zip(c, box))
    assert offset_range_box((1, 4096), (4096, 1), 512, 1023) == ((0, 1), (512, 1024))


# --- the per-kernel pipeline ------------------------------------------------------------------


def _lowered(module: ModuleOp, arch: str = "sm_90") -> tuple[ModuleOp, object]:
    m = module.clone()
    MirageTranspilePass(arch=arch).apply(make_context(), m)
    return m, emit_cuda(m, arch)


def test_reshapes_of_kernel_results_are_views() -> None:
    m, program = _lowered(attention_layer())
    reshapes = [op for op in m.walk() if isinstance(op, kn.ReshapeOp)]
    assert len(reshapes) == 2 and all(kn.ALIAS_ATTR in op.attributes for op in reshapes)
    steps = program.plans["attn"].steps  # type: ignore[attr-defined]
    assert all(isinstance(s, KernelLaunch) for s in steps)


def test_reshape_without_a_view_is_a_copy() -> None:
    m, program = _lowered(copy_graph())
    reshapes = [op for op in m.walk() if isinstance(op, kn.ReshapeOp)]
    assert [kn.ALIAS_ATTR in op.attributes for op in reshapes] == [False, True, True]
    assert [kn.OUTPUT_VIEW_ATTR in op.attributes for op in reshapes] == [False, False, True]
    calls = [s.op for s in program.plans["copies"].steps if isinstance(s, LibraryCall)]  # type: ignore[attr-defined]
    assert calls.count("reshape") == 1


def _emulate(module: ModuleOp, name: str) -> float:
    from mirage_xdsl.runtime.host_emulator import HostEmulator, find_cxx

    if find_cxx() is None:
        pytest.skip("no host C++ compiler")
    _, program = _lowered(module, "sm_80")  # generated kernels only: sm_90's attention kernels are not emulated
    rng = np.random.default_rng(3)
    inputs = [rng.uniform(-1, 1, size=s.shape).astype(np.float16) for s in program.plans[name].inputs]  # type: ignore[attr-defined]
    outs = HostEmulator(program).run(name, inputs)
    refs = run_reference(module, [x.astype(np.float64) for x in inputs])
    errs = []
    for out, ref in zip(outs, refs):
        assert not np.isnan(out).any()
        errs.append(float(np.abs(out.astype(np.float64) - ref).max() / np.abs(ref).max()))
    return max(errs)


def test_host_emulation_of_views_and_copies_matches_reference() -> None:
    assert _emulate(attention_layer(), "attn") < 1e-2
    assert _emulate(copy_graph(), "copies") < 1e-2


# --- the megakernel ---------------------------------------------------------------------------


def _task_graph(module: ModuleOp) -> TaskGraphOp:
    m = module.clone()
    MirageMegakernelPass(per_op=False).apply(make_context(), m)
    return next(op for op in m.walk() if isinstance(op, TaskGraphOp))


def test_megakernel_waits_for_the_producer_tiles_of_the_flat_range() -> None:
    graph = _task_graph(attention_layer())
    tasks = list(graph.tasks)
    kernels = list(dict.fromkeys(t.kernel.data for t in tasks))
    qproj, attn = kernels[0], kernels[1]
    qbuf = next(t for t in tasks if t.kernel.data == qproj).footprint(True)[0][0]
    writers = {t.ident: t.footprint(True)[0][1] for t in tasks if t.kernel.data == qproj}
    producers_of = {e.ident: set(kn.ints(e.producers)) for e in graph.events if e.producers is not None}
    checked = 0
    for t in (t for t in tasks if t.kernel.data == attn):
        (read,) = [b for buf, b in t.footprint(False) if buf == qbuf]  # the head's columns of q
        assert read[1][1] - read[1][0] == 128  # one KV head: group 2 x head dim 64 of [1, 512]
        want = {p for p, w in writers.items() if all(a < d and c < b for (a, b), (c, d) in zip(w, read))}
        assert want and t.wait_event >= 0 and producers_of[t.wait_event] == want
        checked += 1
    assert checked


def test_megakernel_rejects_a_missing_edge_across_a_reshape() -> None:
    from xdsl.dialects.builtin import IntegerAttr, i64

    graph = _task_graph(attention_layer())
    attn = [t for t in graph.tasks if t.wait_event >= 0][0]
    attn.properties["wait"] = IntegerAttr(-1, i64)
    with pytest.raises(MpkVerifyError):
        graph.verify()


def test_megakernel_rejects_a_reshape_copy_with_a_located_error() -> None:
    from xdsl.utils.exceptions import DiagnosticException, PassFailedException

    m = copy_graph()
    with pytest.raises((DiagnosticException, PassFailedException), match=r"kn.reshape is a copy .* fix|this kn.reshape is a copy"):
        MirageMegakernelPass(per_op=False).apply(make_context(), m)


# --- on the GPU ---------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("megakernel", [False, True])
def test_reshape_graph_on_the_gpu(megakernel: bool) -> None:
    from mirage_xdsl.bench.megakernel import check
    from mirage_xdsl.driver.compile import compile

    module = attention_layer(kv_heads=4, group=4, head_dim=128, kv_len=512, hidden=1024)
    graph = compile(module, megakernel={"per_op": False} if megakernel else False, poison_outputs=True)
    for seed in (41, 42):
        assert check(graph, module, seed) < 1e-2


@pytest.mark.gpu
def test_reshape_copies_on_the_gpu() -> None:
    from mirage_xdsl.bench.megakernel import check
    from mirage_xdsl.driver.compile import compile

    module = copy_graph()
    assert check(compile(module, poison_outputs=True), module, 43) < 1e-2
