"""`tune`: the genetic search on one kernel graph, with its evaluator and its cache.

    result = tune(module, "rmsnorm_linear", config=GAConfig(population=12, generations=3))
    result.best.genome.spec()         # -> MirageTranspilePass(tuning=...); .options() -> prepare(..., options=...)

`compile(module, tune=G)` (driver/compile.py) calls `cached_or_tuned`: a best genome cached
for this graph, device, toolchain and compiler is used as it is (no re-tuning); otherwise G
generations run, when a GPU is present.  `mirage-tune` and `mirage-bench --tune` call `tune`
with a stop flag (`StopFlag`: SIGINT, a time budget) and progress callbacks.

The cache is saved after every generation and when the search ends for any reason
(finished, stopped, an exception), atomically, so an interrupted run loses no verdict and a
rerun goes on from it: cached genomes are not evaluated again.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mirage_xdsl.driver.tune.cache import TuneCache, TuneEntry, TuneKey, compiler_digest, graph_fingerprint
from mirage_xdsl.driver.tune.genetic import DEFAULT_CONFIG, Evaluation, GAConfig, GenerationReport, GeneticSearch, Outcome
from mirage_xdsl.driver.tune.space import SPACE, Genome


@dataclass
class TuneResult:
    """What `tune` found."""

    best: Evaluation | None
    """the fastest correct genome (this run or cached), None when nothing passed"""
    outcome: Outcome
    key: TuneKey
    cache_path: Path | None
    cached: int
    """verdicts taken from the cache (not evaluated again)"""
    new: int
    """genomes given a verdict in this run"""
    measured: int
    """of those, how many were run on the device (the others failed to build or share a program)"""


class StopFlag:
    """`stop()` for the search: true after a SIGINT (inside `catch_sigint`) or past the deadline.

    Args:
        budget_s: seconds from now until the flag turns true (None or 0: no deadline).
    """

    def __init__(self, budget_s: float | None = None):
        self.deadline = time.monotonic() + budget_s if budget_s else None
        self.interrupted = False

    def __call__(self) -> bool:
        """Whether the search should stop: a SIGINT was caught or the deadline has passed."""
        return self.interrupted or (self.deadline is not None and time.monotonic() > self.deadline)

    @contextmanager
    def catch_sigint(self, notice: Callable[[str], None] | None = None) -> Iterator[StopFlag]:
        """While inside: the first SIGINT sets the flag (in-flight work finishes, nothing new
        starts), a second one raises KeyboardInterrupt as usual.

        Args:
            notice: called with a one-line message at the first SIGINT.

        Raises:
            KeyboardInterrupt: at the second SIGINT (from the handler, wherever the main
                thread then is).
            ValueError: not called from the main thread (`signal.signal`).
        """

        def handler(signum: int, frame: Any) -> None:
            if self.interrupted:
                raise KeyboardInterrupt
            self.interrupted = True
            if notice is not None:
                notice("interrupted: finishing the work in flight, then saving the cache (Ctrl-C again to abort)")

        previous = signal.signal(signal.SIGINT, handler)
        try:
            yield self
        finally:
            signal.signal(signal.SIGINT, previous)


def single_function(module: Any, func_name: str | None) -> tuple[Any, str]:
    """A module holding a clone of the chosen function only, and its name.

    Raises:
        ValueError: no such function, or several and no `func_name`.
    """
    from xdsl.dialects.builtin import ModuleOp

    from mirage_xdsl.driver.load import select_function

    func = select_function(module, func_name)
    return ModuleOp([func.clone()]), func.sym_name.data


def make_evaluator(single: Any, func_name: str, arch: str | None, *, jobs: int = 8, runs: int | None = None,
                   seed: int = 0, nvcc_cache: str | None = None) -> Any:
    """The GPU evaluator of `func_name` (tests replace this function to plug a fake one).

    Raises:
        ValueError: `arch` is not a CUDA architecture name.
    """
    from mirage_xdsl.driver.nvcc import normalize_arch
    from mirage_xdsl.driver.tune.evaluate import DEFAULT_RUNS, GpuEvaluator
    from mirage_xdsl.runtime.interop import detect_arch

    return GpuEvaluator(single, func_name, normalize_arch(arch or detect_arch()), jobs=jobs,
                        runs=runs or DEFAULT_RUNS, seed=seed, nvcc_cache=nvcc_cache)


def tune_key(single: Any, identity: dict[str, str]) -> TuneKey:
    """The cache key of a one-function module on the evaluator's device and toolchain."""
    return TuneKey(graph_fingerprint(str(single)), identity["device"], identity["arch"], identity["toolchain"], compiler_digest())


def tune(
    module: Any,
    func_name: str | None = None,
    *,
    config: GAConfig = DEFAULT_CONFIG,
    evaluator: Any = None,
    arch: str | None = None,
    jobs: int = 8,
    runs: int | None = None,
    cache_path: str | os.PathLike[str] | None = None,
    use_cache: bool = True,
    stop: Callable[[], bool] | None = None,
    on_evaluation: Callable[[Evaluation], None] | None = None,
    on_generation: Callable[[GenerationReport], None] | None = None,
) -> TuneResult:
    """Run the genetic search on function `func_name` of `module` (see the module docstring).

    Args:
        module: a module of kernel graphs (or one `func.func`); not modified.
        func_name: the function to tune; None when the module has exactly one.
        config: the search parameters.
        evaluator: an `Evaluator` with `identity()` and `close()` (default: `make_evaluator`,
            the GPU one, with `arch`, `jobs`, `runs` and `config.seed`).
        arch: the nvcc architecture (None: the current GPU's).
        jobs: build worker processes of the default evaluator.
        runs: timed replays per genome of the default evaluator (None: `DEFAULT_RUNS`).
        cache_path: the tuning cache file (None: `default_cache_path()`).
        use_cache: False: start from no verdicts and write no file.
        stop: polled between steps (e.g. a `StopFlag`); once true the search winds down.
        on_evaluation: called with each new verdict.
        on_generation: called with each generation's report (after the cache is saved).

    Returns:
        The best genome (this run or cached), the search's outcome, the cache key and the
        counts of cached, new and measured verdicts.

    Raises:
        ValueError: no function of that name, or several and no `func_name`; a bad `config`
            or `arch`.
        NoGpuError: the default evaluator found no GPU.
        NvccNotFoundError: the default evaluator found an nvcc it cannot run.
        DeviceBroken: a candidate broke the CUDA context (the cache holds what was measured).
        OSError: the tuning cache cannot be written.
    """
    single, name = single_function(module, func_name)
    evaluator = evaluator or make_evaluator(single, name, arch, jobs=jobs, runs=runs, seed=config.seed)
    key = tune_key(single, evaluator.identity())
    cache = TuneCache.load(cache_path) if use_cache else TuneCache(None)
    entry = cache.get(key) or TuneEntry()
    known = list(entry.evaluated.values())
    entry_before = set(entry.evaluated)

    def save() -> None:
        entry.merge(search.memo.values())
        cache.put(key, entry)
        cache.save()

    def generation_done(report: GenerationReport) -> None:
        save()
        if on_generation is not None:
            on_generation(report)

    search = GeneticSearch(SPACE, evaluator, config, known=known, stop=stop or (lambda: False),
                           on_evaluation=on_evaluation, on_generation=generation_done)
    try:
        outcome = search.run()
    finally:
        save()
        evaluator.close()
    fresh = [e for g, e in outcome.evaluations.items() if g not in entry_before]
    measured = sum(e.origin == "measured" for e in fresh)
    return TuneResult(outcome.best, outcome, key, cache.path, len(known), len(fresh), measured)


def cached_or_tuned(module: Any, func_name: str | None, arch: str | None, tune_arg: int | GAConfig,
                    cache_path: str | os.PathLike[str] | None = None) -> Genome | None:
    """The genome `compile(..., tune=...)` uses: the cached best for this graph and device,
    else (a GPU present) the best of a fresh search of `tune_arg` generations (or that
    `GAConfig`); None without a GPU or when no genome passed (compile then uses the defaults).

    Raises:
        ValueError: no function of that name, or several and no `func_name`; a bad `arch`
            or search configuration (fewer than 1 generation, see `GAConfig.checked`).
        NvccNotFoundError: an nvcc was found but cannot be run.
        DeviceBroken: a candidate broke the CUDA context during the search.
        OSError: the tuning cache cannot be written.
    """
    from mirage_xdsl.driver.tune.evaluate import NoGpuError

    single, name = single_function(module, func_name)
    evaluator = make_evaluator(single, name, arch)
    try:
        key = tune_key(single, evaluator.identity())
    except NoGpuError:
        return None
    entry = TuneCache.load(cache_path).get(key)
    if entry is not None and entry.best is not None:
        return entry.best.genome
    config = tune_arg if isinstance(tune_arg, GAConfig) else GAConfig(generations=int(tune_arg))
    result = tune(single, name, config=config, evaluator=evaluator, cache_path=cache_path)
    if result.best is None:
        print(f"mirage_xdsl: tuning {name}: no genome passed; using the default pipeline", file=sys.stderr)
        return None
    return result.best.genome
