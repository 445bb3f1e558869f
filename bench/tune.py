"""`mirage-bench --tune`: the genetic tuner (driver/tune/) on each workload's plain graph,
instead of the fixed variant list.

    mirage-bench tuned.md --tune --workloads rmsnorm_bs1,lora --tune-generations 4 --tune-population 16
    mirage-bench tuned.md --tune --files examples/tc/lora.tc gqa.tc --tc-sizes G=4   # TC files

For every selected workload with a plain kernel graph under examples/ (or every `--files`
file: `.mlir`, `.tc` with its `# sizes:` line and `--tc-sizes` overriding it, or a muGraph
`.json`), every function of that file is tuned in this process (compiles in `--jobs` worker
processes, checks and timings on the GPU, the tuning cache reused and updated), and one row is reported: the best genome and
its time, the time of the pipeline's default genome (`c0xr`) when the search evaluated it,
and how many genomes were evaluated and failed.  The torch peers and the saved muGraphs are
not part of this mode (run `mirage-bench` without `--tune` for them).  Ctrl-C stops the
search of the current graph as `mirage-tune` does (in-flight work finishes, the cache is
saved) and reports what was found; the status is then 130.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mirage_xdsl.bench import BenchError
from mirage_xdsl.bench.workloads import EXAMPLES, resolve_files, select

EXIT_INTERRUPTED = 130


@dataclass
class TunedRow:
    """One tuned graph: a row of the `--tune` report.

    Attributes:
        workload: the workload's name.
        graph: the function of its plain kernel graph.
        best: the label of the best genome (None: no genome passed).
        best_us: its device time (µs, median of the timed replays).
        default_us: the time of the pipeline's default genome (`Genome()`), when the search
            evaluated it and it passed.
        evaluated: genomes with a verdict (cached ones included).
        failed: of those, how many failed.
        seconds: wall time of the search.
        note: `no genome passed`, `interrupted` or `stopped`, else empty.
        hand_swept: the label of the fastest hand-swept variant (the space's seed genomes,
            `driver/tune/space.SEED_VARIANTS`: the variant list `mirage-bench` sweeps) this
            search measured, side by side with its best.
        hand_swept_us: its device time (µs).
        generations: (generation, best label, best µs, evaluated so far) after each
            generation.
    """

    workload: str
    graph: str
    best: str | None = None
    best_us: float | None = None
    default_us: float | None = None
    evaluated: int = 0
    failed: int = 0
    seconds: float = 0.0
    note: str = ""
    hand_swept: str | None = None
    hand_swept_us: float | None = None
    generations: list[tuple[int, str, float, int]] = field(default_factory=list)


def tune_workloads(
    workloads: str | None,
    *,
    files: Sequence[str] | None = None,
    tc_sizes: Mapping[str, int] | None = None,
    mugraph_dirs: Sequence[Path] = (),
    generations: int,
    population: int,
    jobs: int,
    seed: int,
    cache_path: Path | None,
    arch: str | None,
    log: Callable[[str], None] = print,
) -> tuple[list[TunedRow], bool]:
    """Tune the plain graph of every selected workload (or every graph of `files`, those of
    the `workloads` named when both are given); return the rows and whether a SIGINT stopped
    the run.

    Args:
        files: `--files`: names or paths (bench/workloads.py `resolve_files`, looked up in
            `mugraph_dirs` and under examples/).
        tc_sizes: sizes overriding the `# sizes:` line of every `.tc` file of `files`.

    Raises:
        BenchError: no GPU, an unknown workload name, no selected workload has a plain
            graph, a file is found nowhere, a `workloads` name matches none of `files`, or
            `tc_sizes` without a `.tc` file.
        TcError: a `.tc` file does not compile (located, one line).
        ValueError: a bad `generations` or `population` (`GAConfig.checked`).
        DeviceBroken: a candidate broke the CUDA context (the tuning cache holds what was
            measured).
    """
    from mirage_xdsl.driver.load import functions, load_module
    from mirage_xdsl.driver.tune.evaluate import NoGpuError, gpu_identity
    from mirage_xdsl.driver.tune.genetic import GAConfig
    from mirage_xdsl.driver.tune.tuner import StopFlag

    try:
        identity = gpu_identity()
    except NoGpuError as err:
        raise BenchError(f"--tune needs a GPU: {err}") from None
    targets = _targets(workloads, files, tc_sizes, mugraph_dirs)
    # every hand-swept variant (seed genome) in generation 0 when the population has room:
    # the search then measures them beside its own genomes in the same run
    config = GAConfig(population=population, generations=generations, elites=max(1, population // 10), seed=seed,
                      seed_fraction=1.0).checked()
    log(f"tuning {len(targets)} file(s) on {identity['device']} ({identity['arch']}): "
        f"{generations} generation(s) of {population}")
    rows: list[TunedRow] = []
    flag = StopFlag()
    with flag.catch_sigint(log):
        for name, path in targets:
            if flag.interrupted:
                break
            sizes = tc_sizes if path.suffix == ".tc" else None
            module = load_module(path, sizes=sizes)
            for func in functions(module):
                if flag.interrupted:
                    break
                rows.append(_tune_one(name, module, func.sym_name.data, config, jobs, cache_path, arch, flag, log))
    return rows, flag.interrupted


def _targets(
    workloads: str | None, files: Sequence[str] | None, tc_sizes: Mapping[str, int] | None, mugraph_dirs: Sequence[Path]
) -> list[tuple[str, Path]]:
    """(workload name, file) of every file to tune: the selected workloads' plain graphs, or
    the `files` (of the selected workloads when both are given)."""
    if not files:
        if tc_sizes:
            raise BenchError("--tc-sizes applies to Tensor Comprehensions files: give them with --files")
        chosen = [w for w in select(workloads) if w.example]
        if not chosen:
            raise BenchError("--tune: none of the selected workloads has a plain kernel graph under examples/")
        return [(w.name, EXAMPLES / w.example) for w in chosen if w.example is not None]
    resolved = resolve_files(files, mugraph_dirs)
    if workloads:
        import fnmatch

        # the files' workload names (the table's, `tc_<stem>`, a stem) or patterns of them
        wanted = [n.strip() for n in workloads.split(",") if n.strip()]
        for name in wanted:
            if not any(fnmatch.fnmatchcase(r.name, name) for r in resolved):
                raise BenchError(f"--workloads {name}: none of the --files (workloads: {', '.join(r.name for r in resolved)})")
        resolved = [r for r in resolved if any(fnmatch.fnmatchcase(r.name, n) for n in wanted)]
    targets = [(r.name, path) for r in resolved for path in r.files]
    if tc_sizes and not any(path.suffix == ".tc" for _, path in targets):
        raise BenchError("--tc-sizes applies to Tensor Comprehensions files (.tc): none among --files")
    return targets


def _tune_one(workload: str, module: Any, name: str, config: Any, jobs: int, cache_path: Path | None,
              arch: str | None, flag: Any, log: Callable[[str], None]) -> TunedRow:
    from mirage_xdsl.driver.tune.space import SPACE, Genome
    from mirage_xdsl.driver.tune.tuner import tune

    row = TunedRow(workload, name)
    start = time.perf_counter()

    def generation(report: Any) -> None:
        if report.best:
            row.generations.append((report.generation, report.best.genome.label, report.best.time_us, report.evaluated))
        best = f"{report.best.genome.label} {report.best.time_us:.2f} us" if report.best else "none yet"
        log(f"  {workload} {name} generation {report.generation + 1}/{config.generations}: best {best} "
            f"({report.evaluated} evaluated, {report.failed} failed)")

    result = tune(module, name, config=config, arch=arch, jobs=jobs, cache_path=cache_path, stop=flag,
                  on_generation=generation)
    row.seconds = time.perf_counter() - start
    evaluations = result.outcome.evaluations
    row.evaluated = len(evaluations)
    row.failed = sum(not e.ok for e in evaluations.values())
    default = evaluations.get(Genome())
    row.default_us = default.time_us if default is not None and default.ok else None
    seeds = set(SPACE.seeds())
    swept = [(e.time_us, e.genome.label) for g, e in evaluations.items() if g in seeds and e.ok and e.time_us is not None]
    if swept:
        row.hand_swept_us, row.hand_swept = min(swept)
    if result.best is not None:
        row.best, row.best_us = result.best.genome.label, result.best.time_us
    else:
        row.note = "no genome passed"
    if result.outcome.stopped:
        row.note = "interrupted" if flag.interrupted else "stopped"
    return row


def _f(value: float | None) -> str:
    return f"{value:.2f}" if value is not None else "-"


def report_lines(rows: list[TunedRow], identity: str) -> list[str]:
    """The markdown table of `rows` (µs: device time of one run, median of the timed replays)."""
    out = [f"# mirage-bench --tune ({identity})", "",
           "| workload | graph | best genome | best µs | best hand-swept variant | its µs | best / hand-swept "
           "| default (c0xrf1) µs | speedup over default | evaluated | failed | s | note |",
           "|---|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        speedup = f"{r.default_us / r.best_us:.2f}x" if r.default_us and r.best_us else "-"
        versus = f"{r.hand_swept_us / r.best_us:.3f}x" if r.hand_swept_us and r.best_us else "-"
        out.append(f"| {r.workload} | {r.graph} | {r.best or '-'} | {_f(r.best_us)} | {r.hand_swept or '-'} "
                   f"| {_f(r.hand_swept_us)} | {versus} | {_f(r.default_us)} | {speedup} "
                   f"| {r.evaluated} | {r.failed} | {r.seconds:.0f} | {r.note} |")
    out += ["", "Best so far after each generation (label, µs, genomes evaluated):", ""]
    for r in rows:
        steps = "; ".join(f"{g + 1}: {label} {us:.2f} ({n})" for g, label, us, n in r.generations)
        out.append(f"- {r.workload} {r.graph}: {steps or '-'}")
    out += ["", "best / hand-swept: the hand-swept variant's time over the best genome's, both measured by "
            "this search in this run (>= 1: the tuner's plan is at least as fast)."]
    return out


def run_tune_mode(args: Any) -> int:
    """`mirage-bench [REPORT] --tune ...`: tune, print the table, write it to REPORT if given.

    Returns:
        The exit status: 0 when every graph found a genome, 1 when one did not, 130
        (`EXIT_INTERRUPTED`) after a SIGINT.

    Raises:
        BenchError, ValueError, DeviceBroken: see `tune_workloads`.
        OSError: REPORT cannot be written.
    """
    from mirage_xdsl.driver.tune.evaluate import gpu_identity
    from mirage_xdsl.frontends.tc import TcError, parse_sizes

    try:
        tc_sizes = parse_sizes(args.tc_sizes or "")
    except ValueError as err:
        raise BenchError(f"--tc-sizes: {err}") from None
    try:
        rows, interrupted = _run_tune(args, tc_sizes)
    except TcError as err:
        raise BenchError(f"{err.location}: {err.message}") from None
    ident = gpu_identity()
    lines = report_lines(rows, f"{ident['device']}, {ident['arch']}")
    print("\n".join(lines[2:]), flush=True)
    if args.report is not None:
        args.report.write_text("\n".join(lines) + "\n")
        print(f"report written to {args.report}", flush=True)
    if interrupted:
        print("mirage-bench: interrupted (the tuning cache was saved)", file=sys.stderr)
        return EXIT_INTERRUPTED
    return 0 if all(r.best is not None for r in rows) else 1


def _run_tune(args: Any, tc_sizes: Mapping[str, int]) -> tuple[list[TunedRow], bool]:
    return tune_workloads(
        args.workloads, files=args.files, tc_sizes=tc_sizes, mugraph_dirs=[*args.mugraphs, args.shared],
        generations=args.tune_generations, population=args.tune_population, jobs=args.jobs,
        seed=args.seed or 0, cache_path=args.tune_cache, arch=args.arch,
        log=lambda text: print(text, flush=True),
    )
