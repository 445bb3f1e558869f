"""`mirage-tune`: the genetic autotuner on one kernel graph (GitHub issue #33).

    mirage-tune examples/rmsnorm_linear.mlir                       # TC defaults: 25 x 100
    mirage-tune examples/lora.mlir --generations 4 --population 16 --budget-s 120
    mirage-tune ../shared/mugraphs/rmsnorm_bs1.json --graph 0 --jobs 16
    mirage-tune examples/lora.mlir --dry-run                       # no GPU: build generation 0
    mirage-tune examples/tc/gqa.tc --tc-sizes G=4                  # TC: sizes from '# sizes:', overridden

Genes are `mirage-transpile` options (driver/tune/space.py: plan rank, pipeline stages,
split-K, grid sums, reduced partials, late finisher, lone-block ring depth).  Each generation
is compiled in `--jobs` worker processes, then every new candidate is checked against the
reference executor on the GPU and timed (median of `--runs` CUDA-graph replays over rotated
input sets).  The best so far is printed after every generation (a rich progress display on a
terminal, plain lines otherwise).  Results go to the tuning cache (`--cache`, default
`$MIRAGE_XDSL_CACHE_DIR/tune.json` or `~/.cache/mirage_xdsl/tune.json`), keyed by graph,
device, toolchain and compiler sources; a rerun does not evaluate cached genomes again, and
`mirage_xdsl.compile(..., tune=G)` uses the cached best.

Ctrl-C: the builds and the measurement in flight finish, nothing new starts, the cache is
saved (atomically), the best so far is printed, exit status 130 (a second Ctrl-C aborts at
once, the cache still saved).  Exit status 1 on errors (one line on stderr), no GPU (without
`--dry-run`) or when no candidate passed.

For tests only: `--fake-evaluator SECONDS` replaces the GPU by a synthetic landscape
(driver/tune/genetic.py `synthetic_time_us`; genomes with 8 stages fail) that sleeps SECONDS
per measured candidate; `$MIRAGE_TUNE_FAKE_LOG` names a file it appends each measured genome to.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

PROG = "mirage-tune"
EXIT_INTERRUPTED = 130


class TuneError(Exception):
    """A user-facing error: printed as one line, exit status 1."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        """Print the usage error as one line on stderr (`mirage-tune: error: ... (see --help)`) and exit with status 1."""
        print(f"{self.prog}: error: {message} (see --help)", file=sys.stderr)
        sys.exit(1)


def build_parser() -> argparse.ArgumentParser:
    """The `mirage-tune` command-line parser (`--fake-evaluator` is hidden, for tests only)."""
    p = _Parser(prog=PROG, description="Genetic autotuning of the compiler's pass options for one kernel graph.")
    p.add_argument("file", type=Path, help="kernel graph: textual IR (.mlir), a Mirage muGraph file (.json) or "
                   "Tensor Comprehensions (.tc, sizes from its '# sizes:' line)")
    p.add_argument("--tc-sizes", metavar="N=64,...", help="sizes of a .tc file, overriding its '# sizes:' line")
    p.add_argument("--graph", help="function name or index in the file (default: the only one)")
    p.add_argument("--generations", type=int, default=25, help="generations (default 25)")
    p.add_argument("--population", type=int, default=100, help="genomes per generation (default 100)")
    p.add_argument("--elites", type=int, help="best genomes kept unchanged (default: a tenth of the population, at least 1)")
    p.add_argument("--crossover", type=float, default=0.8, help="crossover probability of a child (default 0.8)")
    p.add_argument("--mutation", type=float, default=0.07, help="mutation probability of each gene (default 0.07)")
    p.add_argument("--budget-s", type=float, help="wall-clock budget in seconds: then stop as on Ctrl-C")
    p.add_argument("--seed", type=int, default=0, help="seed of the search and of the check inputs (default 0)")
    p.add_argument("--cache", type=Path, help="tuning cache file (default $MIRAGE_XDSL_CACHE_DIR/tune.json)")
    p.add_argument("--no-cache", action="store_true", help="neither read nor write the tuning cache")
    p.add_argument("--jobs", type=int, default=8, help="compile worker processes (default 8)")
    p.add_argument("--runs", type=int, default=20, help="timed runs per candidate, median kept (default 20)")
    p.add_argument("--arch", help="CUDA architecture (default: the GPU's, else sm_90)")
    p.add_argument("--dry-run", action="store_true", help="no GPU needed: compile generation 0 only and report the builds")
    p.add_argument("--fake-evaluator", type=float, metavar="SECONDS", help=argparse.SUPPRESS)  # tests only
    return p


def main(argv: Sequence[str] | None = None) -> None:
    """Console entry point: run `mirage-tune` on `argv` (default `sys.argv[1:]`) and exit.

    Exit status 0 when a candidate passed (with `--dry-run`: when a genome of generation 0 built), 1 when
    none did, without a GPU, on usage errors and on any error (one line on stderr, no traceback), 130
    (`EXIT_INTERRUPTED`) on Ctrl-C.

    Raises:
        SystemExit: with that status (0 for --help); a lost CUDA context exits at once with `os._exit(1)`.
        Exception: an unexpected error, re-raised with its traceback when `$MIRAGE_TUNE_TRACEBACK` is set.
    """
    args = build_parser().parse_args(argv)
    try:
        code = _main(args)
    except KeyboardInterrupt:
        print(f"{PROG}: aborted (the cache was saved)", file=sys.stderr)
        code = EXIT_INTERRUPTED
    except TuneError as err:
        print(f"{PROG}: error: {err}", file=sys.stderr)
        code = 1
    except Exception as err:  # noqa: BLE001 - loader/pipeline errors: one line, no traceback
        from mirage_xdsl.driver.tune.evaluate import DeviceBroken, one_line

        if os.environ.get("MIRAGE_TUNE_TRACEBACK"):
            raise
        print(f"{PROG}: error: {one_line(err)}", file=sys.stderr)
        if isinstance(err, DeviceBroken):
            # the CUDA context is gone (the cache was saved): leave without running CuPy's
            # destructors, which would print their own failures as tracebacks
            sys.stderr.flush()
            sys.stdout.flush()
            os._exit(1)
        code = 1
    sys.exit(code)


def _config(args: argparse.Namespace) -> Any:
    from mirage_xdsl.driver.tune.genetic import GAConfig

    elites = args.elites if args.elites is not None else max(1, args.population // 10)
    try:
        return GAConfig(population=args.population, generations=args.generations, crossover_rate=args.crossover,
                        mutation_rate=args.mutation, elites=elites, seed=args.seed).checked()
    except ValueError as err:
        raise TuneError(str(err)) from None


def _load(args: argparse.Namespace) -> tuple[Any, str]:
    from mirage_xdsl.driver.load import ModuleLoadError, functions, load_module
    from mirage_xdsl.frontends.tc import TcError, parse_sizes

    try:
        sizes = parse_sizes(args.tc_sizes or "")
    except ValueError as err:
        raise TuneError(f"--tc-sizes: {err}") from None
    try:
        module = load_module(args.file, sizes=sizes)
    except TcError as err:
        raise TuneError(f"{err.location}: {err.message}") from None
    except ModuleLoadError as err:
        raise TuneError(str(err)) from None
    names = [f.sym_name.data for f in functions(module)]
    if not names:
        raise TuneError(f"{args.file}: no kernel graph (func.func) in it")
    if args.graph is None:
        if len(names) > 1:
            raise TuneError(f"{args.file} holds {len(names)} graphs: choose one with --graph N or NAME")
        return module, names[0]
    if args.graph in names:
        return module, args.graph
    if args.graph.isdigit() and int(args.graph) < len(names):
        return module, names[int(args.graph)]
    raise TuneError(f"--graph {args.graph}: no such graph (0..{len(names) - 1} or {', '.join(names[:6])})")


def _main(args: argparse.Namespace) -> int:
    if args.jobs < 1 or args.runs < 1:
        raise TuneError("--jobs and --runs must be at least 1")
    config = _config(args)
    module, name = _load(args)
    if args.dry_run:
        return _dry_run(module, name, config, args)
    from mirage_xdsl.driver.tune.evaluate import NoGpuError, SyntheticEvaluator
    from mirage_xdsl.driver.tune.tuner import StopFlag, tune

    evaluator = None
    if args.fake_evaluator is not None:
        evaluator = SyntheticEvaluator(args.fake_evaluator, fails=lambda g: g.stages == 8, log=os.environ.get("MIRAGE_TUNE_FAKE_LOG"))
    else:
        from mirage_xdsl.driver.tune.evaluate import gpu_identity

        try:
            gpu_identity()
        except NoGpuError as err:
            raise TuneError(f"no GPU: {err} (--dry-run compiles generation 0 without one)") from None
    flag = StopFlag(args.budget_s)
    display = _Display(config, sys.stdout.isatty())
    with display, flag.catch_sigint(display.notice):
        result = tune(module, name, config=config, evaluator=evaluator, arch=args.arch, jobs=args.jobs, runs=args.runs,
                      cache_path=args.cache, use_cache=not args.no_cache, stop=flag,
                      on_evaluation=display.evaluation, on_generation=display.generation)
    _summary(result, name, flag)
    if flag.interrupted:
        return EXIT_INTERRUPTED
    return 0 if result.best is not None else 1


def _summary(result: Any, name: str, flag: Any) -> None:
    evaluations = result.outcome.evaluations.values()
    failed = sum(not e.ok for e in evaluations)
    why = " (interrupted)" if flag.interrupted else " (time budget spent)" if result.outcome.stopped else ""
    print(f"{name}: {len(result.outcome.generations)} generation(s){why}; {result.new} new genome(s), "
          f"{result.measured} timed, {result.cached} from the cache, {failed} failed in all", flush=True)
    if result.best is None:
        print(f"{name}: no candidate passed the check", flush=True)
        return
    best = result.best
    pipeline = f'mirage-transpile{{tuning="{best.genome.spec()}"}}' if best.genome.spec() else "mirage-transpile (the default)"
    print(f"best: {best.genome.label} {best.time_us:.2f} us ({pipeline})", flush=True)
    if result.cache_path is not None:
        print(f"cache: {result.cache_path}", flush=True)


def _dry_run(module: Any, name: str, config: Any, args: argparse.Namespace) -> int:
    """Build generation 0 (pipeline, CUDA, nvcc) without a GPU; print one line per genome."""
    from mirage_xdsl.driver.tune.genetic import GeneticSearch
    from mirage_xdsl.driver.tune.space import SPACE
    from mirage_xdsl.driver.tune.tuner import make_evaluator, single_function

    single, _ = single_function(module, name)
    evaluator = make_evaluator(single, name, args.arch, jobs=args.jobs, seed=args.seed)
    population = GeneticSearch(SPACE, evaluator, config).initial_population()
    print(f"{name}: dry run, generation 0: {len(population)} genome(s) for {evaluator.arch}", flush=True)
    ok = 0
    programs: set[str] = set()
    try:
        for build in evaluator.build(population, lambda: False):
            if build.error is None:
                ok += 1
                programs.add(build.program)
                print(f"  {build.genome.label}: built, program {build.program[:12]}", flush=True)
            else:
                print(f"  {build.genome.label}: {build.error}", flush=True)
    finally:
        evaluator.close()
    print(f"{name}: {ok}/{len(population)} built, {len(programs)} distinct program(s)", flush=True)
    return 0 if ok else 1


class _Display:
    """Progress: a rich display on a terminal, else one plain line per generation."""

    def __init__(self, config: Any, rich: bool):
        self.config = config
        self.rich = rich
        self.evaluated = 0
        self.failed = 0
        self._progress: Any = None
        self._task: Any = None
        self._best = "-"

    def __enter__(self) -> _Display:
        if self.rich:
            from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

            self._progress = Progress(SpinnerColumn(), TextColumn("gen {task.completed:.0f}/{task.total:.0f}"), BarColumn(),
                                      TextColumn("{task.description}"), TimeElapsedColumn())
            self._progress.start()
            self._task = self._progress.add_task(self._text(), total=self.config.generations)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()

    def _text(self) -> str:
        return f"best {self._best} | evaluated {self.evaluated}, failed {self.failed}"

    def _print(self, text: str) -> None:
        if self._progress is not None:
            self._progress.console.print(text, markup=False, highlight=False)
        else:
            print(text, flush=True)

    def notice(self, text: str) -> None:
        """Print a one-line message (the first Ctrl-C's) without breaking the progress display."""
        self._print(text)

    def evaluation(self, ev: Any) -> None:
        """Count one new verdict (`Evaluation`), failed or not, and refresh the progress display."""
        self.evaluated += 1
        self.failed += not ev.ok
        if self._progress is not None:
            self._progress.update(self._task, description=self._text())

    def generation(self, report: Any) -> None:
        """Print the line of a finished generation (`GenerationReport`: best so far, counts, time) and advance the bar."""
        best = report.best
        self._best = f"{best.genome.label} {best.time_us:.2f} us" if best else "none yet"
        self._print(f"generation {report.generation + 1}/{self.config.generations}: best {self._best}; "
                    f"{report.new} new, {report.evaluated} evaluated, {report.failed} failed, {report.elapsed_s:.1f} s")
        if self._progress is not None:
            self._progress.update(self._task, completed=report.generation + 1, description=self._text())


if __name__ == "__main__":
    main()
