"""Generated kernels on a GPU against the reference executor, on fresh random inputs with
NaN-poisoned outputs: every candidate of every shared muGraph file, a split-K grid-sum kernel
re-arming its counters, the late finisher at every pipeline depth and shift, weight prefetch
back to back under PDL, and attention with P in registers (eagerly and in CUDA-graph mode)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import MUGRAPH_FILES

from mirage_xdsl.runtime.random_inputs import numpy_values, random_inputs


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

    text = (Path(__file__).parents[1] / "data" / "split_k_grid_sum.mlir").read_text()
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

    module = load_module(Path(__file__).parents[2] / "examples" / "rmsnorm_linear.mlir")
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

    text = (Path(__file__).parents[2] / "examples" / "rmsnorm_linear_bs8.mlir").read_text()
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

    text = (Path(__file__).parents[2] / "examples" / "rmsnorm_linear_bs8.mlir").read_text()
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

    text = (Path(__file__).parents[1] / "filecheck" / "codegen" / "register-chain.mlir").read_text()
    module = Parser(make_context(), text).parse_module()
    for cuda_graph in (False, True):
        g = compile_graph(module.clone(), cuda_graph=cuda_graph, poison_outputs=True)
        assert "mma_chain_run" in g.source
        for seed in range(3):
            inputs = [0.3 * x for x in random_inputs(g.plan.inputs, seed=seed)]
            (ref,) = run_reference(module, [x.astype(np.float64) for x in inputs])
            (out,) = g(*[cupy.asarray(x) for x in inputs])
            assert _rel_err([cupy.asnumpy(out).astype(np.float64)], [ref]) < 1e-2
