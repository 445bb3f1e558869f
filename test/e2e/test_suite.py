"""The program suite (bench/suite/, examples/suite/): files, registration, and every program in
every dtype through the default pipeline on the host emulator at reduced sizes, compared with
the float64 reference executor on seeded inputs with NaN-poisoned outputs
(`bench.fuzz_check.check_emulated`).  Softmax, attention and cross-entropy are checked again with
inputs scaled so that their scores reach +-50 (real attention logits reach +-30; `exp`
without the max subtracted overflows fp16 past 11).
"""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np
import pytest

from mirage_xdsl.bench.fuzz_check import check_emulated, compare
from mirage_xdsl.bench.fuzz_graphs import TOLERANCE, FuzzCase
from mirage_xdsl.bench.suite import graphs
from mirage_xdsl.bench.suite.table import BY_PROGRAM, DTYPE_TAGS, PROGRAMS, SUITE, SuiteWorkload
from mirage_xdsl.bench.suite.torch_programs import PROGRAMS as TORCH_PROGRAMS
from mirage_xdsl.bench.suite.write import build
from mirage_xdsl.runtime.host_emulator import find_cxx

needs_cxx = pytest.mark.skipif(find_cxx() is None, reason="the host emulator needs a C++ compiler")


def test_suite_files_equal_their_builders() -> None:
    from mirage_xdsl.bench.suite.write import main

    assert main(["--check"]) == 0, "examples/suite is stale: python -m mirage_xdsl.bench.suite.write"


def test_suite_workloads_are_registered() -> None:
    from mirage_xdsl.bench import BenchError
    from mirage_xdsl.bench.workloads import BY_NAME, EXAMPLES, resolve, select, workload_of_file

    names = [w.name for w in select("suite")]
    assert names == [w.name for w in SUITE] and len(set(names)) == len(names)
    assert not set(names) & {w.name for w in select(None)}  # the default set stays the old one
    assert [w.name for w in select("suite_softmax_f16,suite")][0] == "suite_softmax_f16"
    assert [w.name for w in select("suite_decode_g8_*")] == [w.name for w in SUITE if "decode_g8_" in w.name]
    assert len(select("suite_*_bf16,suite_*_f16")) == sum(w.dtype in ("float16", "bfloat16") for w in SUITE)
    with pytest.raises(BenchError, match="matches no workload"):
        select("suite_nothing_*")
    for res in resolve(select("suite"), []):
        (path,) = res.files
        assert path.is_file() and workload_of_file(path) == res.name
    assert BY_NAME["suite_decode_g8_kv32k_bf16"].example == "suite/suite_decode_g8_kv32k_bf16.mlir"
    assert (EXAMPLES / "suite" / "suite_lora_r64_f16.mlir").is_file()


def test_every_program_has_a_torch_program_of_its_arity() -> None:
    for p in PROGRAMS:
        w = SuiteWorkload("x", p.program, "float16", p.small)
        inputs = len(build(w).body.block.first_op.args)  # type: ignore[union-attr]
        params = [q for q in inspect.signature(TORCH_PROGRAMS[p.program]).parameters.values()]
        tensors = [q for q in params if q.name != "dim"]
        assert len(tensors) == inputs, p.program


def test_suite_names_cover_every_point_and_dtype() -> None:
    assert len(SUITE) == sum(len(p.points) * len(p.dtypes) for p in PROGRAMS)
    assert all(w.name.endswith("_" + DTYPE_TAGS[w.dtype]) for w in SUITE)
    assert {w.sizes["group"] for w in SUITE if w.program == "decode_attention"} == {1, 8, 32}


# ---------------------------------------------------------------------------------------
# Numerics on the host emulator (reduced sizes)


def _cases() -> list[Any]:
    """(program, dtype, reduced sizes): every program in every dtype of the table, plus the
    shapes that take other paths (batch 1 MLPs, every reduced dim, 1 and 32 query heads per
    KV head, LoRA rank 64)."""
    out = [pytest.param(p.program, d, p.small, id=f"{p.program}-{DTYPE_TAGS[d]}") for p in PROGRAMS for d in p.dtypes]
    extra = [
        ("gelu_mlp", {"batch": 1, "hidden": 256, "ffn": 768}),
        ("swiglu_mlp", {"batch": 1, "hidden": 256, "ffn": 688}),
        ("reduce_sum", {"dim": 0, "d0": 4, "d1": 64, "d2": 256}),
        ("reduce_sum", {"dim": 2, "d0": 4, "d1": 64, "d2": 256}),
        ("decode_attention", {"kv_heads": 4, "group": 1, "kv_len": 2048, "head_dim": 128}),
        ("decode_attention", {"kv_heads": 1, "group": 32, "kv_len": 1024, "head_dim": 128}),
        ("lora", {"batch": 16, "hidden": 256, "rank": 64}),
        # rows long enough for the one-pass (online) plan: a running max over 32 loop tiles
        ("cross_entropy", {"rows": 528, "vocab": 32768}),
    ]
    for program, sizes in extra:
        label = "-".join(f"{k}{v}" for k, v in sizes.items() if k in ("batch", "dim", "group", "rank", "rows"))
        out.append(pytest.param(program, "float16", sizes, id=f"{program}-f16-{label}"))
    return out


@needs_cxx
@pytest.mark.parametrize(("program", "dtype", "sizes"), _cases())
def test_suite_program_emulated(program: str, dtype: str, sizes: dict[str, Any]) -> None:
    module = getattr(graphs, program)(dtype, program, **sizes)
    out = check_emulated(FuzzCase(program, "kernel", dtype, module), seed=7)
    assert out.status == "ok", f"{out.status}: {out.reason}: {out.message}"


@pytest.mark.gpu
@pytest.mark.parametrize(("program", "dtype", "sizes"), _cases())
def test_suite_program_gpu(program: str, dtype: str, sizes: dict[str, Any]) -> None:
    """The same graphs on the GPU (`bench.fuzz_check.check_gpu`: seeded inputs, NaN-poisoned
    outputs, float64 reference); mirage-bench checks the full sizes."""
    from mirage_xdsl.bench.fuzz_check import check_gpu

    module = getattr(graphs, program)(dtype, program, **sizes)
    out = check_gpu(FuzzCase(program, "kernel", dtype, module), seed=7)
    assert out.status == "ok", f"{out.status}: {out.reason}: {out.message}"


def _scaled_inputs(plan: Any, scales: dict[str, float], names: list[str], seed: int) -> list[np.ndarray]:
    """Seeded inputs of `plan`, input `name` uniform in +-scales[name] (default 0.5)."""
    from mirage_xdsl.runtime.random_inputs import random_inputs

    return [random_inputs([spec], seed + i, scale=scales.get(n, 0.5))[0] for i, (spec, n) in enumerate(zip(plan.inputs, names))]


def _scores(program: str, values: list[np.ndarray]) -> np.ndarray:
    """The logits the program exponentiates: the input of softmax / cross-entropy, Q K /
    sqrt(head_dim) of attention."""
    if program in ("decode_attention", "prefill_attention", "prefill_attention_causal"):
        q, k = values[0], values[1]
        return (q @ k) / np.sqrt(q.shape[-1])
    return values[0]


def _stable_params() -> list[Any]:
    return [pytest.param(p.program, d, id=f"{p.program}-{DTYPE_TAGS[d]}") for p in PROGRAMS if p.stable for d in ("float16", "bfloat16")]


def _scaled_run(program: str, dtype: str) -> tuple[list[np.ndarray], list[np.ndarray], float]:
    """(outputs, float64 reference, peak |score|) of the program
    at its reduced sizes on the emulator, inputs scaled as table.py's `scaled_inputs` says."""
    from mirage_xdsl.bench.fuzz_check import _emulate, lower_case
    from mirage_xdsl.codegen.cuda_target import emit_cuda
    from mirage_xdsl.reference.executor import run_reference
    from mirage_xdsl.runtime.random_inputs import numpy_values

    p = BY_PROGRAM[program]
    module = getattr(graphs, program)(dtype, program, **p.small)
    case = FuzzCase(program, "kernel", dtype, module)
    prog = emit_cuda(lower_case(case))
    plan = prog.plans[program]
    names = [a.name_hint for a in module.body.block.first_op.args]  # type: ignore[union-attr]
    inputs = _scaled_inputs(plan, p.scaled_inputs, names, seed=11)
    values = [numpy_values(x, s.dtype) for x, s in zip(inputs, plan.inputs)]
    peak = float(np.abs(_scores(program, values)).max())
    refs = run_reference(module, values, func_name=program)
    outs = _emulate(prog, case, inputs, None)
    outs = [numpy_values(o, s.dtype) if s.dtype != "bfloat16" else o for o, s in zip(outs, plan.outputs)]
    return outs, refs, peak


@needs_cxx
@pytest.mark.parametrize(("program", "dtype"), _stable_params())
def test_suite_stable_programs_with_scores_of_50(program: str, dtype: str) -> None:
    """Inputs scaled (table.py `scaled_inputs`) so that the scores reach about +-50: every
    output finite and within the dtype's tolerance of the float64 reference (strict: no
    allowance for the rounding of intermediates)."""
    outs, refs, peak = _scaled_run(program, dtype)
    assert 40.0 <= peak <= 80.0, f"scores reach {peak:.1f}, not about 50: adjust scaled_inputs"
    assert all(np.isfinite(r).all() for r in refs)
    ok, err, msg = compare(outs, refs, dtype)
    assert ok, f"error {err:.3g} > {TOLERANCE[dtype]} with scores of +-{peak:.0f}: {msg}"


def _stable_full_points() -> list[Any]:
    return [
        pytest.param(p.program, dtype, sizes, id=f"{p.program}{suffix}-{DTYPE_TAGS[dtype]}")
        for p in PROGRAMS
        if p.stable
        for suffix, sizes in p.points
        for dtype in ("float16", "bfloat16")
    ]


@pytest.mark.gpu
@pytest.mark.parametrize(("program", "dtype", "sizes"), _stable_full_points())
def test_suite_stable_programs_with_scores_of_50_gpu(program: str, dtype: str, sizes: dict[str, Any]) -> None:
    """The stable programs at the suite's own sizes, through the default pipeline (the kernels
    mirage-bench times: the sm_90a flash prefill, split-key decode, one-pass cross-entropy) on
    the GPU, inputs scaled so that the scores reach about +-50, NaN-poisoned outputs: every
    output finite and within the dtype's tolerance of the float64 reference (strict, as the
    emulated check: no allowance for the rounding of intermediates)."""
    from mirage_xdsl.bench.fuzz_check import gpu_outputs, lower_case
    from mirage_xdsl.codegen.cuda_target import emit_cuda
    from mirage_xdsl.driver.nvcc import compile_cuda
    from mirage_xdsl.reference.executor import run_reference
    from mirage_xdsl.runtime.interop import detect_arch
    from mirage_xdsl.runtime.random_inputs import numpy_values

    module = getattr(graphs, program)(dtype, program, **sizes)
    prog = emit_cuda(lower_case(FuzzCase(program, "kernel", dtype, module)), detect_arch())
    cubin = str(compile_cuda(prog.source, prog.arch))
    plan = prog.plans[program]
    names = [a.name_hint for a in module.body.block.first_op.args]  # type: ignore[union-attr]
    inputs = _scaled_inputs(plan, BY_PROGRAM[program].scaled_inputs, names, seed=13)
    values = [numpy_values(x, s.dtype) for x, s in zip(inputs, plan.inputs)]
    peak = float(np.abs(_scores(program, values)).max())
    assert 40.0 <= peak <= 80.0, f"scores reach {peak:.1f}, not about 50: adjust scaled_inputs"
    refs = run_reference(module, values, func_name=program)
    outs = gpu_outputs(plan, cubin, prog.source, inputs)
    ok, err, msg = compare(outs, refs, dtype)
    assert ok, f"error {err:.3g} > {TOLERANCE[dtype]} with scores of +-{peak:.0f}: {msg}"


def test_fill_references_computes_what_the_cpu_phase_would(tmp_path: Any) -> None:
    """`--refs-on-device`: the GPU phase's references (bench/device_refs.py) equal the CPU
    phase's, and a changed file is an error, not a wrong reference."""
    from mirage_xdsl.bench.cache import BenchCache
    from mirage_xdsl.bench.device_refs import fill_references
    from mirage_xdsl.bench.prepare import prepare_all
    from mirage_xdsl.bench.workloads import Resolved

    src = tmp_path / "small.mlir"
    w = SuiteWorkload("small", "add_rmsnorm", "float16", {"rows": 8, "cols": 256})
    from mirage_xdsl.bench.suite.write import text_of

    src.write_text(text_of(w))
    resolved = [Resolved("small", (src,))]
    seeds = {"small": 3}
    common = dict(arch="sm_90", seeds=seeds, variants=None, jobs=1, cache=BenchCache(None), log=lambda s: None)
    with_refs, refs = prepare_all(resolved, **common)  # type: ignore[arg-type]
    deferred, none = prepare_all(resolved, references=False, **common)  # type: ignore[arg-type]
    if with_refs[0].error is not None and "nvcc" in with_refs[0].error.lower():
        pytest.skip(f"no build here: {with_refs[0].error}")
    assert not none and deferred[0].ref_key is None and deferred[0].source == str(src.resolve())
    got: dict[str, list[list[np.ndarray]]] = {}
    fill_references(deferred, got, seeds)
    assert deferred[0].error is None and deferred[0].ref_key == 0
    for a, b in zip(got["small"][0], refs["small"][with_refs[0].ref_key or 0]):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)  # the CPU phase keeps float32
    src.write_text(text_of(w).replace("written by", "edited, written by"))
    again, _ = prepare_all(resolved, references=False, **common)  # type: ignore[arg-type]
    again[0].source_sha = deferred[0].source_sha
    fill_references(again, got, seeds)
    assert again[0].error is not None and "changed since the CPU phase" in again[0].error


@pytest.mark.gpu
@pytest.mark.parametrize("program", [p.program for p in PROGRAMS])
def test_torch_programs_compute_the_graphs(program: str) -> None:
    """Each torch peer computes its kernel graph: float64 on the CPU, reduced sizes, against
    the reference executor (marked gpu: torch is on the GPU machines only)."""
    torch = pytest.importorskip("torch")
    from mirage_xdsl.bench.suite.torch_programs import torch_program
    from mirage_xdsl.reference.executor import run_reference

    p = BY_PROGRAM[program]
    # the workload whose bound sizes (reduce_sum's dim) are those of the reduced sizes
    w = next(x for x in SUITE if x.program == program and x.sizes.get("dim") == p.small.get("dim"))
    module = build(w, **p.small)
    rng = np.random.default_rng(2)
    shapes = [tuple(a.type.get_shape()) for a in module.body.block.first_op.args]  # type: ignore[union-attr]
    values = [rng.uniform(-0.5, 0.5, s) for s in shapes]
    refs = run_reference(module, values, func_name=w.name)
    fn = torch_program(w.name)
    assert fn is not None
    got = fn(*[torch.from_numpy(v) for v in values])
    got = got if isinstance(got, tuple) else (got,)
    assert len(got) == len(refs)
    for t, r in zip(got, refs):
        np.testing.assert_allclose(t.numpy(), r, rtol=1e-9, atol=1e-9 * float(np.abs(r).max()))


def test_prepare_only_with_refs_on_device(tmp_path: Any) -> None:
    """`mirage-bench --prepare-only DIR --refs-on-device`: no reference files, the manifest
    says so and names each candidate's file; the flag alone is a one-line usage error."""
    import json

    from conftest import assert_one_line_error, run_tool

    from mirage_xdsl.driver.nvcc import find_nvcc

    err = run_tool("mirage_xdsl.tools.mirage_bench", "out.md", "--refs-on-device", "--workloads", "suite_softmax_f16")
    assert_one_line_error("mirage-bench", err, "--refs-on-device goes with --prepare-only")
    if find_nvcc() is None:
        pytest.skip("nvcc not found: the CPU phase cannot compile")
    src = tmp_path / "tiny.mlir"
    from mirage_xdsl.bench.suite.write import text_of

    src.write_text(text_of(SuiteWorkload("tiny", "rmsnorm", "float16", {"rows": 8, "cols": 256})))
    prep = tmp_path / "prep"
    proc = run_tool("mirage_xdsl.tools.mirage_bench", "--prepare-only", str(prep), "--files", str(src), "--variants", "none",
                    "--refs-on-device", "--no-cache", "--arch", "sm_90", "--jobs", "1", "--seed", "1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    manifest = json.loads((prep / "manifest.json").read_text())
    assert manifest["refs_on_device"] is True
    (cand,) = manifest["candidates"]
    assert cand["ref_key"] is None and cand["source"] == str(src.resolve()) and cand["error"] is None
    assert not list(prep.rglob("ref_*.npz"))


def test_cross_entropy_is_one_pass_over_long_rows() -> None:
    """Rows of 32768 logits: one kernel whose loop keeps a running max and rescaled sums
    (`DeviceModel.online_rowwise_k_tiles`), not a max pass, a sum pass and a combine."""
    from mirage_xdsl.driver.compile import prepare

    for dtype in ("float16", "float32"):
        plan = prepare(graphs.cross_entropy(dtype, "ce", rows=1024, vocab=32768), None, "sm_90").plan
        assert len(plan.steps) == 1, [getattr(s, "kernel", s) for s in plan.steps]
