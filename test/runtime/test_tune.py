"""The genetic autotuner (driver/tune/, tools/mirage_tune.py): search space, GA engine, cache,
compile(tune=...), the CLI (SIGINT, resume, dry run); one GPU test tunes a small example."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import warnings
from dataclasses import fields
from pathlib import Path

import pytest
from conftest import assert_one_line_error, has_gpu, run_tool

from mirage_xdsl.bench.prepare import DEFAULT_VARIANTS, parse_variant
from mirage_xdsl.driver.tune.cache import TuneCache, TuneCacheWarning, TuneEntry, TuneKey
from mirage_xdsl.driver.tune.evaluate import SyntheticEvaluator
from mirage_xdsl.driver.tune.genetic import Build, Evaluation, GAConfig, GeneticSearch, best_of, synthetic_time_us
from mirage_xdsl.driver.tune.space import (
    DEFAULT_LONE_BLOCK_MAX_STAGES,
    SEED_VARIANTS,
    SPACE,
    Genome,
    SpaceError,
    genome_from_label,
    genome_from_options,
)
from mirage_xdsl.target.tuning import TuningPoint

REPO = Path(__file__).resolve().parents[2]
LORA = REPO / "examples" / "lora.mlir"
TOOL = "mirage_xdsl.tools.mirage_tune"


# ---------------------------------------------------------------------------------------
# The space


def test_variant_strings_round_trip() -> None:
    assert DEFAULT_VARIANTS == SEED_VARIANTS
    for variant in DEFAULT_VARIANTS:
        genome = genome_from_label(variant)
        assert genome.label == variant
        assert SPACE.violations(genome) == []
        assert SPACE.repair(genome) == genome
        assert parse_variant(variant) == {k: getattr(genome, k) for k in parse_variant(variant)}
    assert parse_variant("c0s7xrf1") == {"candidate": 0, "stages": 7, "always_split": True, "reduce_partials": True, "late_finisher": 1}
    extended = Genome(candidate=3, stages=2, always_split=False, grid_sum=False, reduce_partials=False, late_finisher=0, lone_block_max_stages=6)
    assert extended.label == "c3s2nl6"
    assert genome_from_label("c3s2nl6") == extended
    assert parse_variant("c3s2nl6")["grid_sum"] is False
    with pytest.raises(SpaceError):
        genome_from_label("c0s2z")


def test_genome_defaults_are_the_pipelines() -> None:
    """The default genome is the default tuning point, and each of its fields is the default of
    the pass that makes that choice (so `tuning=""` changes nothing)."""
    pytest.importorskip("mirage_xdsl.passes.pipeline")
    from mirage_xdsl.passes.conversion.kn_partition import PartitionOptions
    from mirage_xdsl.passes.cute.late_finisher import LateFinisherPass
    from mirage_xdsl.passes.pipeline import MirageTranspilePass
    from mirage_xdsl.passes.tb.decompose_accumulators import DecomposeAccumulatorsPass
    from mirage_xdsl.passes.tb.plan_pipeline import PlanPipelinePass

    assert MirageTranspilePass().point() == TuningPoint() and Genome().options() == TuningPoint().options()
    kn = PartitionOptions()
    for name in ("candidate", "always_split", "grid_sum", "lone_block_max_stages", "online_softmax"):
        assert getattr(kn, name) == getattr(Genome(), name), name
    assert PlanPipelinePass().stages == Genome().stages
    assert PlanPipelinePass().lone_block_max_stages == Genome().lone_block_max_stages == DEFAULT_LONE_BLOCK_MAX_STAGES
    assert DecomposeAccumulatorsPass().reduce_partials == Genome().reduce_partials
    assert LateFinisherPass().shift == Genome().late_finisher
    assert {g.name for g in SPACE.genes} == {f.name for f in fields(Genome)}


def test_validity_rules() -> None:
    bad = Genome(grid_sum=False, late_finisher=2, reduce_partials=True, stages=1, candidate=40)
    problems = SPACE.violations(bad)
    assert any("late_finisher needs grid_sum" in p for p in problems)
    assert any("reduce_partials needs grid_sum" in p for p in problems)
    assert any(p.startswith("stages=1") for p in problems) and any(p.startswith("candidate=40") for p in problems)
    fixed = SPACE.repair(bad)
    assert SPACE.violations(fixed) == []
    assert (fixed.late_finisher, fixed.reduce_partials, fixed.stages, fixed.candidate) == (0, False, 0, 15)
    with pytest.raises(SpaceError, match="late_finisher needs grid_sum"):
        SPACE.validate(bad)
    assert genome_from_options({"candidate": 2, "stages": 4}) == Genome(candidate=2, stages=4)
    with pytest.raises(SpaceError, match="unknown"):
        genome_from_options({"tile": 64})
    with pytest.raises(SpaceError, match="expected bool"):
        genome_from_options({"grid_sum": 1})
    seeds = SPACE.seeds()
    assert len(seeds) == len(set(seeds)) == len(DEFAULT_VARIANTS)
    assert seeds[0] == Genome() == genome_from_label("c0xrf1")  # the pipeline's default first
    assert seeds[1] == genome_from_label("c0x")


# ---------------------------------------------------------------------------------------
# The GA engine (synthetic landscape: optimum 10 µs at c11s5xrf2)


def _search(evaluator: SyntheticEvaluator, **config: int) -> GeneticSearch:
    return GeneticSearch(SPACE, evaluator, GAConfig(**{"population": 40, "generations": 20, "elites": 4, "seed": 0, **config}))


def test_ga_gets_near_the_optimum_deterministically() -> None:
    runs = []
    for _ in range(2):
        evaluator = SyntheticEvaluator()
        outcome = _search(evaluator).run()
        runs.append((outcome, evaluator.measured))
    (first, measured1), (second, measured2) = runs
    # a GA guarantees no optimum: with seed 0 this space (8 genes since online_softmax) ends one
    # candidate rank away from c11 (10.7 us); the genes that matter are at their optimum
    assert first.best is not None and first.best.time_us <= 10.7
    best = first.best.genome
    assert abs(best.candidate - 11) <= 1 and best.label.startswith(f"c{best.candidate}s5xrf2")
    assert first.best.time_us < min(synthetic_time_us(g) for g in SPACE.seeds())
    assert measured1 == measured2 and first.best == second.best
    times = [g.best.time_us for g in first.generations]
    assert times == sorted(times, reverse=True)  # the best so far never gets worse
    assert not first.stopped and len(first.generations) == 20


def test_elitism_keeps_the_best() -> None:
    search = _search(SyntheticEvaluator(), population=12, elites=3)
    population = search.initial_population()
    assert len(population) == 12 and population[:6] == SPACE.seeds()[:6]
    search.evaluate(population)
    ranked = sorted((search.memo[g] for g in population), key=lambda e: (e.time_us, e.genome))
    nxt = search.next_population(population)
    assert nxt[:3] == [e.genome for e in ranked[:3]]
    assert len(nxt) == 12


def test_failed_candidates_never_win() -> None:
    # the fastest region fails to build; wrong results carry a time but no fitness
    evaluator = SyntheticEvaluator(fails=lambda g: g.late_finisher == 2)
    outcome = _search(evaluator, generations=8).run()
    assert outcome.best is not None and outcome.best.genome.late_finisher != 2
    failed = [e for e in outcome.evaluations.values() if not e.ok]
    assert failed and all(e.fitness == 0.0 and e.origin == "build" for e in failed)
    wrong = Evaluation(Genome(), 1.0, "wrong result: relative error 0.5 > 0.01")
    right = Evaluation(Genome(candidate=1), 20.0)
    assert not wrong.ok and wrong.fitness == 0.0
    assert best_of([wrong, right]) == right and best_of([wrong]) is None


def test_duplicates_are_evaluated_once() -> None:
    evaluator = SyntheticEvaluator()  # its program ignores lone_block_max_stages
    outcome = _search(evaluator, generations=6).run()
    assert len(evaluator.measured) == len(set(evaluator.measured))  # no genome timed twice
    shapes = [tuple(v for k, v in g.options().items() if k != "lone_block_max_stages") for g in evaluator.measured]
    assert len(shapes) == len(set(shapes))  # one timing per program
    shared = [e for e in outcome.evaluations.values() if e.origin.startswith("same program as")]
    assert shared and all(e.time_us == synthetic_time_us(e.genome) for e in shared)


def test_known_verdicts_and_stop() -> None:
    first = SyntheticEvaluator()
    done = _search(first, generations=3).run()
    again = SyntheticEvaluator()
    resumed = GeneticSearch(SPACE, again, GAConfig(population=40, generations=3, elites=4, seed=0), known=done.evaluations.values()).run()
    assert again.measured == [] and resumed.best == done.best  # the same generations, all known
    count = 0

    def stop() -> bool:
        return count >= 5

    def counted(ev: Evaluation) -> None:
        nonlocal count
        count += 1

    stopped = GeneticSearch(SPACE, SyntheticEvaluator(), GAConfig(population=20, generations=5, elites=2), stop=stop, on_evaluation=counted).run()
    assert stopped.stopped and len(stopped.evaluations) == 5 and len(stopped.generations) == 1


def test_config_checks() -> None:
    for bad in ({"population": 0}, {"elites": 11, "population": 10}, {"mutation_rate": 1.5}):
        with pytest.raises(ValueError):
            GAConfig(**bad).checked()


# ---------------------------------------------------------------------------------------
# The cache


KEY = TuneKey("g" * 64, "NVIDIA H200", "sm_90", "nvcc 13.0", "c" * 64)


def _entry() -> TuneEntry:
    entry = TuneEntry()
    entry.merge([
        Evaluation(genome_from_label("c0x"), 14.5, program="p1"),
        Evaluation(genome_from_label("c0s7xrf1"), 12.25, program="p2"),
        Evaluation(genome_from_label("c9s8x"), None, "SharedMemoryExceeded: 300000 bytes", origin="build"),
        Evaluation(genome_from_label("c1x"), None, "NvccNotFoundError: no nvcc", transient=True),
    ])
    return entry


def test_cache_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "tune.json"
    cache = TuneCache.load(path)
    assert cache.get(KEY) is None
    cache.put(KEY, _entry())
    cache.save()
    data = json.loads(path.read_text())
    assert data["version"] == 1
    (stored,) = data["entries"].values()
    assert stored["best"] == "c0s7xrf1" and stored["best_us"] == 12.25 and "c1x" not in stored["evaluated"]
    back = TuneCache.load(path).get(KEY)
    assert back is not None and back.best is not None
    assert back.best.genome == genome_from_label("c0s7xrf1") and back.best.program == "p2"
    assert set(back.evaluated) == {genome_from_label(v) for v in ("c0x", "c0s7xrf1", "c9s8x")}
    assert not back.evaluated[genome_from_label("c9s8x")].ok
    # another tuner's entry written meanwhile survives our save
    other = TuneKey("h" * 64, "NVIDIA H100", "sm_90", "nvcc 13.0", "c" * 64)
    theirs = TuneCache.load(path)
    theirs.put(other, _entry())
    theirs.save()
    cache.save()
    assert TuneCache.load(path).get(other) is not None


def test_cache_key_changes_with_device_and_toolchain() -> None:
    digests = {KEY.digest()}
    for change in ({"device": "NVIDIA H100 80GB HBM3"}, {"arch": "sm_100"}, {"toolchain": "nvcc 13.1"},
                   {"compiler": "d" * 64}, {"graph": "f" * 64}):
        digests.add(TuneKey(**{**KEY.__dict__, **change}).digest())
    assert len(digests) == 6


@pytest.mark.parametrize("text", ["{not json", '{"version": 7, "entries": {}}', "[]"])
def test_corrupt_cache_is_ignored_and_rewritten(tmp_path: Path, text: str) -> None:
    path = tmp_path / "tune.json"
    path.write_text(text)
    with pytest.warns(TuneCacheWarning, match="ignored"):
        cache = TuneCache.load(path)
    assert cache.entries == {}
    cache.put(KEY, _entry())
    cache.save()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert TuneCache.load(path).get(KEY) is not None


def test_bad_cache_entry_is_dropped(tmp_path: Path) -> None:
    path = tmp_path / "tune.json"
    cache = TuneCache(path)
    cache.put(KEY, _entry())
    cache.save()
    data = json.loads(path.read_text())
    (stored,) = data["entries"].values()
    stored["evaluated"]["c0x"] = {"time_us": -1}
    path.write_text(json.dumps(data))
    with pytest.warns(TuneCacheWarning, match="dropped"):
        assert TuneCache.load(path).get(KEY) is None


# ---------------------------------------------------------------------------------------
# compile(tune=...)


def _needs_compiler() -> None:
    pytest.importorskip("mirage_xdsl.passes.pipeline")
    from mirage_xdsl.driver.nvcc import find_nvcc

    if find_nvcc() is None:
        pytest.skip("nvcc not found")


def test_compile_uses_the_cached_genome(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _needs_compiler()
    import mirage_xdsl as mx
    from mirage_xdsl.driver import compile as driver_compile
    from mirage_xdsl.driver.load import load_module
    from mirage_xdsl.driver.tune import tuner

    evaluator = SyntheticEvaluator()
    monkeypatch.setattr(tuner, "make_evaluator", lambda *a, **k: evaluator)
    module = load_module(LORA)
    single, _ = tuner.single_function(module, None)
    key = tuner.tune_key(single, evaluator.identity())
    cache = TuneCache(tmp_path / "tune.json")
    entry = TuneEntry()
    chosen = genome_from_label("c3x")
    entry.merge([Evaluation(chosen, 5.0), Evaluation(Genome(), 9.0)])
    cache.put(key, entry)
    cache.save()
    graph = mx.compile(module, tune=4, tune_cache=tmp_path / "tune.json", cache_dir=tmp_path / "nvcc")
    assert evaluator.measured == []  # the cached best, no re-tuning
    expected = driver_compile.prepare(module, None, "sm_90", options=chosen.options()).program.source
    assert graph.source == expected
    assert graph.source != driver_compile.prepare(module, None, "sm_90").program.source


def test_compile_tunes_when_nothing_is_cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _needs_compiler()
    import mirage_xdsl as mx
    from mirage_xdsl.driver.load import load_module
    from mirage_xdsl.driver.tune import tuner

    evaluator = SyntheticEvaluator()
    monkeypatch.setattr(tuner, "make_evaluator", lambda *a, **k: evaluator)
    module = load_module(LORA)
    graph = mx.compile(module, tune=GAConfig(population=6, generations=2, elites=1), tune_cache=tmp_path / "t.json",
                       cache_dir=tmp_path / "nvcc")
    assert 6 <= len(evaluator.measured) <= 12
    (stored,) = json.loads((tmp_path / "t.json").read_text())["entries"].values()
    best = genome_from_label(stored["best"])
    assert stored["best_us"] == min(synthetic_time_us(g) for g in evaluator.measured)
    from mirage_xdsl.driver.compile import prepare

    assert graph.source == prepare(module, None, "sm_90", options=best.options()).program.source


# ---------------------------------------------------------------------------------------
# mirage-tune


def _tune_cmd(cache: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", TOOL, str(LORA), "--cache", str(cache), "--seed", "3", *extra]


def test_mirage_tune_sigint_saves_the_cache_and_resumes(tmp_path: Path) -> None:
    cache, log1, log2 = tmp_path / "tune.json", tmp_path / "run1.log", tmp_path / "run2.log"
    cmd = _tune_cmd(cache, "--fake-evaluator", "0.1", "--population", "12", "--generations", "8")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, MIRAGE_TUNE_FAKE_LOG=str(log1)))
    assert proc.stdout is not None
    lines = []
    for line in proc.stdout:  # wait for generation 1, then interrupt generation 2
        lines.append(line)
        if line.startswith("generation 1/"):
            break
    time.sleep(0.35)
    start = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=10)
    assert time.monotonic() - start < 10
    assert proc.returncode == 130, "".join(lines) + out + err
    assert "interrupted" in out + err and "best: " in out
    data = json.loads(cache.read_text())
    (entry,) = data["entries"].values()
    first = set(entry["evaluated"])
    measured1 = log1.read_text().split()
    assert 12 < len(measured1) < 12 * 8  # generation 2 started, the run did not finish
    assert set(measured1) <= first  # every measured genome is in the cache
    done = run_tool(TOOL, *_tune_cmd(cache, "--fake-evaluator", "0", "--population", "12", "--generations", "3")[3:],
                    env={"MIRAGE_TUNE_FAKE_LOG": str(log2)}, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{len(first)} from the cache" in done.stdout
    measured2 = log2.read_text().split() if log2.exists() else []
    assert not set(measured2) & first  # nothing cached was evaluated again


def test_mirage_tune_prints_each_generation(tmp_path: Path) -> None:
    proc = run_tool(TOOL, str(LORA), "--fake-evaluator", "0", "--population", "8", "--generations", "3", "--no-cache", timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    gens = [ln for ln in proc.stdout.splitlines() if ln.startswith("generation ")]
    assert [g.split(":")[0] for g in gens] == ["generation 1/3", "generation 2/3", "generation 3/3"]
    assert all(" us;" in g for g in gens)
    assert proc.stdout.splitlines()[-1].startswith("best: c")


@pytest.mark.skipif(has_gpu(), reason="checks the message shown without a GPU")
def test_mirage_tune_without_gpu(tmp_path: Path) -> None:
    proc = run_tool(TOOL, str(LORA), "--cache", str(tmp_path / "t.json"), timeout=120)
    assert_one_line_error("mirage-tune", proc, "no GPU:")


def test_mirage_tune_dry_run(tmp_path: Path) -> None:
    _needs_compiler()
    proc = run_tool(TOOL, str(LORA), "--dry-run", "--population", "3", "--jobs", "2", timeout=300,
                    env={"MIRAGE_XDSL_CACHE_DIR": str(tmp_path)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "3/3 built" in proc.stdout
    assert not (tmp_path / "tune.json").exists()  # a dry run times nothing and caches nothing


def test_mirage_tune_reads_tc_files(tmp_path: Path) -> None:
    """A `.tc` file is tuned like any graph: sizes from its `# sizes:` line, `--tc-sizes`
    overriding them (the fake evaluator: no GPU needed)."""
    tc = REPO / "examples" / "tc" / "gqa.tc"
    proc = run_tool(TOOL, str(tc), "--fake-evaluator", "0", "--population", "4", "--generations", "1", "--no-cache",
                    "--tc-sizes", "G=1,L=256", timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines()[-1].startswith("best: c")
    proc = run_tool(TOOL, str(tc), "--fake-evaluator", "0", "--no-cache", "--tc-sizes", "Q=1", timeout=120)
    assert_one_line_error("mirage-tune", proc, f"{tc}:6:5: unknown size symbol 'Q' in the sizes given")


# ---------------------------------------------------------------------------------------
# On a GPU


@pytest.mark.gpu
def test_tune_lora_on_the_gpu(tmp_path: Path) -> None:
    import cupy

    import mirage_xdsl as mx
    from mirage_xdsl.driver.load import load_module
    from mirage_xdsl.driver.tune.tuner import tune
    from mirage_xdsl.reference.executor import run_reference
    from mirage_xdsl.runtime.measure import relative_error, to_device
    from mirage_xdsl.runtime.random_inputs import numpy_values, random_inputs

    module = load_module(LORA)
    result = tune(module, config=GAConfig(population=6, generations=2, elites=1, seed=0), jobs=4, runs=10,
                  cache_path=tmp_path / "tune.json")
    assert result.best is not None
    rank0 = result.outcome.evaluations[genome_from_label("c0x")]  # a seed of generation 0
    assert rank0.ok and result.best.time_us <= rank0.time_us
    graph = mx.compile(module, tune=2, tune_cache=tmp_path / "tune.json", cache_dir=tmp_path / "nvcc")
    host = random_inputs(graph.plan.inputs, 11)
    outs = graph(*[to_device(cupy, x) for x in host])
    refs = run_reference(module, [numpy_values(x, s.dtype) for x, s in zip(host, graph.plan.inputs)])
    got = [numpy_values(cupy.asnumpy(o), s.dtype) for o, s in zip(outs, graph.plan.outputs)]
    assert relative_error(got, refs) < 1e-2
    assert len(result.outcome.generations) == 2
    assert isinstance(result.best, Evaluation) and not isinstance(result.best, Build)


# ---------------------------------------------------------------------------------------
# mirage-bench --tune


def test_bench_tune_mode_with_a_synthetic_evaluator(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    pytest.importorskip("mirage_xdsl.passes.pipeline")
    from mirage_xdsl.bench.tune import report_lines, tune_workloads
    from mirage_xdsl.driver.tune import evaluate, tuner

    monkeypatch.setattr(evaluate, "gpu_identity", lambda: {"device": "synthetic", "arch": "sm_00"})
    monkeypatch.setattr(tuner, "make_evaluator", lambda *a, **k: SyntheticEvaluator())
    rows, interrupted = tune_workloads("lora", generations=2, population=6, jobs=1, seed=0,
                                       cache_path=tmp_path / "t.json", arch=None, log=lambda s: None)
    assert not interrupted and len(rows) == 1
    (row,) = rows
    assert row.workload == "lora" and row.best is not None and row.best_us == synthetic_time_us(genome_from_label(row.best))
    assert row.default_us == synthetic_time_us(Genome())  # the default (c0xrf1) is the first seed of generation 0
    # population 6 with every slot for seeds: generation 0 is the first six hand-swept variants
    assert row.hand_swept is not None and row.hand_swept_us is not None and row.best_us <= row.hand_swept_us
    assert [g for g, *_ in row.generations] == [0, 1] and row.generations[-1][1:3] == (row.best, row.best_us)
    table = report_lines(rows, "synthetic")
    assert any(line.startswith(f"| lora | {row.graph} | {row.best} | {row.best_us:.2f} | {row.hand_swept} |") for line in table)
    assert any(line.startswith(f"- lora {row.graph}: 1: ") for line in table)


def test_bench_tune_mode_tunes_tc_files(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """`mirage-bench --tune --files X.tc Y.mlir`: one row per graph, a `.tc` file is workload
    `tc_<stem>` with its sizes line overridden by `--tc-sizes`; --workloads filters the files."""
    pytest.importorskip("mirage_xdsl.passes.pipeline")
    from mirage_xdsl.bench import BenchError
    from mirage_xdsl.bench.tune import tune_workloads
    from mirage_xdsl.driver.tune import evaluate, tuner

    monkeypatch.setattr(evaluate, "gpu_identity", lambda: {"device": "synthetic", "arch": "sm_00"})
    seen: list[str] = []

    def fake(single, name, *a, **k):  # noqa: ANN001, ANN002, ANN003, ANN202 - make_evaluator's signature
        seen.append(str(single))
        return SyntheticEvaluator()

    monkeypatch.setattr(tuner, "make_evaluator", fake)
    files = [str(REPO / "examples" / "tc" / "lora.tc"), "lora.mlir"]
    kwargs = dict(generations=1, population=4, jobs=1, seed=0, cache_path=tmp_path / "t.json", arch=None, log=lambda s: None)
    rows, _ = tune_workloads(None, files=files, tc_sizes={"M": 8}, **kwargs)  # type: ignore[arg-type]
    assert [(r.workload, r.graph) for r in rows] == [("lora", "lora"), ("tc_lora", "lora")]
    assert all(r.best is not None for r in rows)
    assert "tensor<8x256xf16>" in seen[1] and "tensor<16x256xf16>" in seen[0]
    rows, _ = tune_workloads("tc_lora", files=files, **kwargs)  # type: ignore[arg-type]
    assert [r.workload for r in rows] == ["tc_lora"]
    with pytest.raises(BenchError, match="--tc-sizes applies to Tensor Comprehensions files"):
        tune_workloads("lora", tc_sizes={"M": 8}, **kwargs)  # type: ignore[arg-type]


@pytest.mark.skipif(has_gpu(), reason="checks the message shown without a GPU")
def test_bench_tune_without_gpu() -> None:
    proc = run_tool("mirage_xdsl.tools.mirage_bench", "--tune", "--workloads", "lora", timeout=120)
    assert_one_line_error("mirage-bench", proc, "--tune needs a GPU")


@pytest.mark.gpu
def test_gpu_a_crashing_candidate_is_one_failed_genome() -> None:
    """A candidate whose kernel traps breaks its CUDA context: measured in the isolated GPU
    process it is one failed genome ("crashed the GPU process"), the process is replaced and
    the next candidate is timed as usual (before, the search stopped with DeviceBroken)."""
    import re
    from pathlib import Path

    import mirage_xdsl as mx
    from mirage_xdsl.driver.compile import prepare
    from mirage_xdsl.driver.nvcc import compile_cuda
    from mirage_xdsl.driver.tune.evaluate import CRASHED, GpuEvaluator, build_program
    from mirage_xdsl.runtime.interop import detect_arch

    g = mx.new_kernel_graph("tiny")
    X = g.new_input((8, 256), dtype="float16", name="X")
    W = g.new_input((256, 64), dtype="float16", name="W")
    g.mark_output(g.matmul(g.rms_norm(X, (256,)), W))
    arch = detect_arch()
    good = build_program(str(g.module), "tiny", {}, arch, None)
    assert "error" not in good, good
    source = prepare(g.module, "tiny", arch).program.source
    trapping = re.sub(r"(const int tid = [^;]*;)", r'\1\n  asm volatile("trap;");', source, count=1)
    assert trapping != source
    bad = dict(good, cubin=str(compile_cuda(trapping, arch)))
    ev = GpuEvaluator(g.module, "tiny", arch, runs=3)
    try:
        crashed = ev.measure(Build(Genome(), program="bad", payload=bad))
        assert crashed.time_us is None and crashed.error is not None and crashed.error.startswith(CRASHED), crashed
        timed = ev.measure(Build(Genome(candidate=1), program=good["program"], payload=good))
        assert timed.error is None and timed.time_us is not None and timed.time_us > 0, timed
    finally:
        ev.close()
    assert Path(good["cubin"]).is_file()
