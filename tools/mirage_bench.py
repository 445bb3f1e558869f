"""`mirage-bench`: compile, check and time every candidate of every workload against torch.

    mirage-bench results.md                          # everything: CPU phase, then the GPU
    mirage-bench results.md --workloads lora,gqa_bs1 --no-compile-peer
    mirage-bench --prepare-only prep/ --seed 7       # CPU machine: plans, cubins, references
    python tools/mirage_bench.py results.md --from prep/   # device machine: run, check, time

Workloads (bench/workloads.py): rmsnorm_bs1, rmsnorm_bs8, gated_mlp, gqa_bs1, gqa_bs8, lora,
ntrans_bs1, mha_bs1, mqa_bs1, softmax, mha_stable, attention_prefill (the default set), and
the program suite (bench/suite/, examples/suite/: `--workloads suite` for all 63 of them, or
by name, e.g. suite_softmax_f16,suite_decode_g8_kv32k_bf16, or by pattern, 'suite_decode_*').
The candidates of a workload are every graph of its saved Mirage muGraph file
(`examples/mugraphs`, `$MIRAGE_SHARED/mugraphs` or a `--mugraphs DIR`) and every tuning
variant (`--variants`, `c<rank>[s<stages>][x][r]`) of its plain kernel graph under examples/.

CPU phase (bench/prepare.py): pipeline + emit_cuda + nvcc and the float64 reference of each
candidate in `--jobs` worker processes, cached on disk (`--cache-dir`, default
~/.cache/mirage_xdsl/bench): a rerun with the same inputs and `--seed` takes well under 2 s;
with a fresh seed (the default) only the references are computed again.

GPU phase (bench/gpu_phase.py, one child process per workload; `--in-process` for one
process; `--gpus N`: N workloads at a time, each child on one GPU of its own with its torch
peers, so a suite whose torch.compile peers take half a minute each fits one call on a
multi-GPU machine): every candidate is checked against the reference (NaN-poisoned outputs) and timed
with CUDA events on rotated input sets (median of 60 sweeps); the best of ours per workload
is the fastest correct candidate by device time (one CUDA graph of at least 16 runs over
the input sets in turn, replayed).  In the same process the workload's torch program is timed the same way: eager,
captured in a CUDA graph, and torch.compile(mode="max-autotune-no-cudagraphs") captured in
our CUDA graph (`--no-compile-peer` skips that one; it compiles for minutes).  The copy
bandwidth (device-to-device copy of 1 GiB) is measured once per run.

Output: progress on stderr, then the summary table (workload, best ours µs, best saved
Mirage and plain-graph µs, each peer's µs, speedup over the best peer, MB moved, GB/s and the
fraction of the copy bandwidth), and the markdown report with every candidate.

`--tune` (bench/tune.py): instead of the fixed variant list, the genetic tuner of
driver/tune/ searches the pass options of each workload's plain graph, or of every graph of
`--files` (Tensor Comprehensions `.tc` files too: sizes from their `# sizes:` line,
`--tc-sizes` overriding them) (`--tune-generations`, `--tune-population`, the tuning cache
`--tune-cache`); one row per graph: the best genome and its µs against the default genome's
and the fastest hand-swept variant's.

A `.tc` file given to `--files` is a workload of its own, `tc_<stem>` (examples/tc/lora.tc:
`tc_lora`); bare names are also looked up under examples/tc/.

Exit status: 0 when every candidate passed or was rejected at compile time (more shared
memory than the GPU has), 1 otherwise and on errors (one line on stderr, no traceback), 130
on Ctrl-C (`mirage-bench: interrupted`: pending builds cancelled, workers and their nvcc
ended within seconds, nothing half-written saved).
The GPU phase needs numpy and CuPy (torch and triton for the peers), never xDSL: run it from
a checkout with `python tools/mirage_bench.py REPORT --from DIR`.  Outputs too large to carry
(the suite's): `--prepare-only DIR --refs-on-device` saves no references, and the GPU phase
computes them from the same graph files, which needs xDSL there (tools/device_check.sh
installs it from the carried wheels).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

PROG = "mirage-bench"
REPO = Path(__file__).resolve().parents[1]


def _bootstrap() -> None:
    """Make `import mirage_xdsl` work from a bare checkout (the repo root IS the package)."""
    try:
        import mirage_xdsl  # noqa: F401

        return
    except ImportError:
        pass
    link_dir = Path(tempfile.mkdtemp(prefix="mirage_xdsl_path_"))
    (link_dir / "mirage_xdsl").symlink_to(REPO, target_is_directory=True)
    sys.path.insert(0, str(link_dir))


if not __package__:  # run as a script: python tools/mirage_bench.py
    _bootstrap()

from mirage_xdsl.bench import BenchError  # noqa: E402
from mirage_xdsl.bench.peers import COMPILE_MODE, COMPILE_MODES  # noqa: E402


class _Parser(argparse.ArgumentParser):
    """argparse, with usage errors as one line and exit status 1 like every other error."""

    def error(self, message: str) -> None:  # type: ignore[override]
        """Print the usage error as one line on stderr (`mirage-bench: error: ... (see --help)`) and exit with status 1."""
        print(f"{self.prog}: error: {message} (see --help)", file=sys.stderr)
        sys.exit(1)


def build_parser() -> argparse.ArgumentParser:
    """The `mirage-bench` command-line parser (the hidden `--child-*` options are for its own GPU-phase child processes)."""
    from mirage_xdsl.bench.workloads import GROUPS, WORKLOADS, default_mugraph_dir

    p = _Parser(prog=PROG, description="Compile, check and time every candidate of the Mirage workloads against torch on one GPU.")
    p.add_argument("report", nargs="?", type=Path, help="markdown file to write the report to")
    p.add_argument("--workloads", metavar="A,B", help="workloads or groups to run (default: "
                   f"{','.join(w.name for w in WORKLOADS if w.name not in GROUPS['suite'])}; group: suite)")
    p.add_argument("--files", nargs="+", metavar="FILE",
                   help="muGraph / .mlir / Tensor Comprehensions .tc files (names or paths) instead of the workload table")
    p.add_argument("--tc-sizes", metavar="N=64,...",
                   help="with --tune: sizes overriding the '# sizes:' line of the .tc files of --files")
    p.add_argument("--mugraphs", action="append", type=Path, default=[], metavar="DIR",
                   help="extra directory of muGraph files (e.g. mha_bs1.json), searched before the shared one")
    p.add_argument("--shared", type=Path, default=default_mugraph_dir(), metavar="DIR",
                   help="the saved muGraph directory (default $MIRAGE_SHARED/mugraphs if set, else examples/mugraphs)")
    p.add_argument("--no-examples", action="store_true", help="leave out the plain kernel graphs under examples/")
    p.add_argument("--variants", help="comma-separated tuning variants of the plain graphs, c<rank>[s<stages>][x][r] "
                   "(kn-fuse plan rank, cp.async stages, x = split-K too, r = partials reduced before the grid sum); "
                   "'none' = the default pipeline once (default: c0x..c15x,c0s3x,c0s4x,c0xr..c7xr)")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="worker processes of the CPU phase")
    p.add_argument("--arch", help="CUDA architecture (default: the GPU's, else sm_90)")
    p.add_argument("--cache-dir", type=Path, help="CPU-phase cache (default ~/.cache/mirage_xdsl/bench)")
    p.add_argument("--no-cache", action="store_true", help="neither read nor write the CPU-phase cache")
    p.add_argument("--nvcc-cache-dir", help="cubin cache of nvcc (default $MIRAGE_XDSL_CACHE_DIR or ~/.cache/mirage_xdsl)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--prepare-only", type=Path, metavar="DIR", help="CPU phase only: save plans, cubins and references in DIR")
    mode.add_argument("--from", dest="from_dir", type=Path, metavar="DIR", help="GPU phase only, from a --prepare-only DIR")
    p.add_argument("--refs-on-device", action="store_true",
                   help="with --prepare-only: save no references, the GPU phase computes them (needs xDSL there; "
                   "for large outputs such as the suite's, whose references are too big to carry)")
    p.add_argument("--no-bench", action="store_true", help="check only: no timing, no peers")
    p.add_argument("--contractions", action="store_true",
                   help="the contraction workloads instead (our sm_90a einsum kernels vs torch.einsum/matmul; "
                        "--workloads picks among them, e.g. bmm_4x4096,gemm_8192_fp16)")
    p.add_argument("--no-compile-peer", action="store_true", help="leave out the torch.compile peer (it compiles for minutes)")
    p.add_argument("--compile-mode", choices=COMPILE_MODES, default=COMPILE_MODE,
                   help=f"mode of the torch.compile peer (default {COMPILE_MODE}: Triton GEMM templates autotuned "
                   "against cuBLAS, minutes per program; 'default' compiles in seconds, GEMMs stay cuBLAS calls)")
    p.add_argument("--atol-rel", type=float, default=1e-2,
                   help="max|out - ref| / max|ref| that passes (default 1e-2; 5x that for bf16 outputs, bench/check.py)")
    p.add_argument("--seed", type=int, help="base seed (default: fresh); workload k of the table uses seed + k")
    p.add_argument("--in-process", action="store_true", help="GPU phase in this process (no restart after a crash)")
    p.add_argument("--child-timeout", type=float, default=900, help="seconds one workload's GPU process may take")
    p.add_argument(
        "--gpus",
        type=int,
        default=1,
        help="GPU phase: run this many workloads at a time, each on one GPU of its own with its torch peers "
        "(the first N of CUDA_VISIBLE_DEVICES, else GPUs 0..N-1; not with --in-process)",
    )
    tune = p.add_argument_group("tuning (--tune: the genetic tuner per workload's plain graph instead of --variants)")
    tune.add_argument("--tune", action="store_true", help="tune each workload's plain graph (needs a GPU; no peers, no muGraphs)")
    tune.add_argument("--tune-generations", type=int, default=5, help="generations per graph (default 5)")
    tune.add_argument("--tune-population", type=int, default=24, help="genomes per generation (default 24)")
    tune.add_argument("--tune-cache", type=Path, help="tuning cache file (default $MIRAGE_XDSL_CACHE_DIR/tune.json)")
    p.add_argument("--child-env", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--child-candidates", help=argparse.SUPPRESS)
    p.add_argument("--child-peers", help=argparse.SUPPRESS)
    p.add_argument("--child-peer-source", type=int, help=argparse.SUPPRESS)
    return p


def main(argv: list[str] | None = None) -> None:
    """Console entry point: run `mirage-bench` on `argv` (default `sys.argv[1:]`) and exit.

    Exit status 0 when every candidate passed or was rejected at compile time (with `--tune`: every graph
    found a genome), 1 otherwise, on usage errors and on any error (one line on stderr, no traceback),
    130 on Ctrl-C.

    Raises:
        SystemExit: with that status (0 for --help).
        Exception: an unexpected error, re-raised with its traceback when `$MIRAGE_BENCH_TRACEBACK` is set.
    """
    args = build_parser().parse_args(argv)
    try:
        code = _main(args)
    except KeyboardInterrupt:
        # the CPU phase has stopped its workers and saved nothing half-written; a GPU-phase
        # child (which gets the terminal's Ctrl-C too) leaves the message to its parent
        if not (args.child_env or args.child_candidates is not None):
            print(f"{PROG}: interrupted", file=sys.stderr)
        sys.exit(130)
    except BenchError as err:
        print(f"{PROG}: error: {err}", file=sys.stderr)
        sys.exit(1)
    except Exception as err:  # noqa: BLE001 - one line, no traceback
        from mirage_xdsl.bench.prepare import one_line

        if os.environ.get("MIRAGE_BENCH_TRACEBACK"):
            raise
        print(f"{PROG}: error: {one_line(err)}", file=sys.stderr)
        sys.exit(1)
    sys.exit(code)


def _log(text: str) -> None:
    print(text, flush=True)


def _detect_arch_elsewhere(default: str | None = "sm_90") -> str | None:
    """The GPU's `sm_XY`, asked in a child process so that this one never creates a CUDA
    context (its worker processes are forked)."""
    import subprocess

    code = "import cupy; print(cupy.cuda.runtime.getDeviceCount() and cupy.cuda.Device(0).compute_capability)"
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return default
    return f"sm_{out}" if out.isdigit() and out != "0" else default


def _compile_mode(args: argparse.Namespace) -> str | None:
    """The torch.compile peer's mode, None with --no-compile-peer."""
    return None if args.no_compile_peer else args.compile_mode


def _child_command() -> list[str]:
    return [sys.executable, str(Path(__file__).resolve())]


def _main(args: argparse.Namespace) -> int:
    from mirage_xdsl.bench import gpu_phase

    if args.child_env:
        return gpu_phase.env_child_main(not args.no_bench)
    if args.child_candidates is not None:
        indices = [int(i) for i in args.child_candidates.split(",") if i not in ("", "-")]
        return gpu_phase.child_main(args.from_dir, indices, args.child_peers, bench=not args.no_bench,
                                    atol_rel=args.atol_rel, compile_mode=_compile_mode(args),
                                    peer_source=args.child_peer_source)
    if args.gpus < 1 or (args.gpus > 1 and args.in_process):
        raise BenchError(f"--gpus {args.gpus}: expected a count of 1 or more, and --in-process runs on one GPU only")
    if args.gpus > 1:
        gpu_phase.child_devices(args.gpus, os.environ.get("CUDA_VISIBLE_DEVICES"))  # too few listed: the error now
    if args.contractions:
        from mirage_xdsl.bench.contraction import run as run_contractions

        text = run_contractions(args.workloads, compile_mode=_compile_mode(args), atol_rel=args.atol_rel, log=_log)
        if args.report is not None:
            args.report.write_text(text)
        print(text)
        return 0
    if args.tune:
        from mirage_xdsl.bench.tune import run_tune_mode

        if args.prepare_only is not None or args.from_dir is not None or args.variants is not None:
            raise BenchError("--tune replaces --variants and runs in one process: leave out --variants, --prepare-only and --from")
        return run_tune_mode(args)
    if args.tc_sizes is not None:
        raise BenchError("--tc-sizes goes with --tune (the CPU-phase cache keys on file bytes: "
                         "write the sizes in the .tc file's '# sizes:' line)")
    from mirage_xdsl.bench.prepare import load_prepared, parse_variants, save_prepared
    from mirage_xdsl.bench.workloads import select

    wanted = {w.name for w in select(args.workloads)} if args.workloads else None
    parse_variants(args.variants)
    if not args.atol_rel > 0:
        raise BenchError("--atol-rel must be positive")
    if args.jobs < 1:
        raise BenchError("--jobs must be at least 1")
    if args.prepare_only is None and args.report is None:
        raise BenchError("give the markdown report path (or --prepare-only DIR)")
    if args.prepare_only is not None and args.report is not None:
        raise BenchError("--prepare-only writes no report: leave out the report path")
    if args.refs_on_device and args.prepare_only is None:
        raise BenchError("--refs-on-device goes with --prepare-only (a run on the GPU machine computes its references anyway)")
    if args.from_dir is not None:
        prepared, refs, manifest = load_prepared(args.from_dir)
        seeds = manifest["seeds"]
        position = {id(p): i for i, p in enumerate(prepared)}
        if wanted is not None:
            missing = wanted - {p.workload for p in prepared}
            if missing:
                raise BenchError(f"{args.from_dir} holds no candidates of {', '.join(sorted(missing))}")
            prepared = [p for p in prepared if p.workload in wanted]
        if args.files:
            names = {Path(f).name for f in args.files}
            prepared = [p for p in prepared if p.file in names]
        if args.no_examples:
            prepared = [p for p in prepared if p.kind == "mugraph"]
        if not prepared:
            raise BenchError("no candidates selected")
        prep_dir = args.from_dir
        arch = manifest["arch"]
        positions = [position[id(p)] for p in prepared]
        if args.in_process and manifest.get("refs_on_device"):
            from mirage_xdsl.bench.device_refs import fill_references

            fill_references(prepared, refs, seeds)
        return _gpu_phase(args, prep_dir, prepared, refs, seeds, arch, positions)

    prepared, refs, seeds, arch = _cpu_phase(args, wanted)
    if args.prepare_only is not None:
        save_prepared(args.prepare_only, prepared, refs, seeds, arch,
                      extra={"refs_on_device": True} if args.refs_on_device else None)
        bad = [p for p in prepared if p.error]
        for prep in bad:
            print(f"{prep.workload} {prep.file} {prep.graph}: {prep.error}")
        failed = [p for p in bad if not p.rejected]
        print(f"saved {len(prepared)} candidates to {args.prepare_only} ({len(failed)} failed, {len(bad) - len(failed)} rejected)")
        return 1 if failed else 0
    prep_dir = Path(tempfile.mkdtemp(prefix="mirage_bench_prep_"))
    try:
        save_prepared(prep_dir, prepared, refs, seeds, arch)
        prepared, refs, _ = load_prepared(prep_dir)
        return _gpu_phase(args, prep_dir, prepared, refs, seeds, arch, None)
    finally:
        shutil.rmtree(prep_dir, ignore_errors=True)


def _cpu_phase(args: argparse.Namespace, wanted: set[str] | None):  # type: ignore[no-untyped-def]
    from mirage_xdsl.bench.cache import BenchCache, default_cache_dir
    from mirage_xdsl.bench.prepare import parse_variants, prepare_all, workload_seeds
    from mirage_xdsl.bench.workloads import resolve, resolve_files, select
    from mirage_xdsl.driver.nvcc import normalize_arch

    start = time.perf_counter()
    dirs = [*args.mugraphs, args.shared]
    variants = parse_variants(args.variants)
    if args.files:
        resolved = resolve_files(args.files, dirs)
        if wanted is not None:
            resolved = [r for r in resolved if r.name in wanted]
        if args.no_examples:
            resolved = [type(r)(r.name, tuple(f for f in r.files if f.suffix == ".json")) for r in resolved]
    else:
        resolved = resolve(select(args.workloads), dirs, examples=not args.no_examples)
    resolved = [r for r in resolved if r.files]
    if not resolved:
        raise BenchError("no input files selected")
    try:
        arch = normalize_arch(args.arch) if args.arch else (_detect_arch_elsewhere() or "sm_90")
    except ValueError as err:
        raise BenchError(str(err)) from None
    base = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "little") % (2**31)
    seeds = workload_seeds([r.name for r in resolved], base)
    cache = BenchCache(None if args.no_cache else (args.cache_dir or default_cache_dir()))
    _log(f"{len(resolved)} workload(s) for {arch}, base seed {base}" + (f", cache {cache.root}" if cache.root else ", no cache"))
    prepared, refs = prepare_all(resolved, arch=arch, seeds=seeds, variants=variants, jobs=args.jobs, cache=cache,
                                 nvcc_cache=args.nvcc_cache_dir, log=_log, references=not args.refs_on_device)
    _log(
        f"CPU phase: {time.perf_counter() - start:.2f} s; builds {cache.build_hits} cached, {cache.build_misses} built; "
        f"references {cache.ref_hits} cached, {cache.ref_misses} computed"
    )
    if cache.build_misses or cache.ref_misses:
        cache.prune()
    return prepared, refs, seeds, arch


def _gpu_phase(args, prep_dir, prepared, refs, seeds, arch, positions) -> int:  # type: ignore[no-untyped-def]
    from mirage_xdsl.bench import gpu_phase
    from mirage_xdsl.bench.report import counts_line, print_summary, summarize, write_report

    bench = not args.no_bench
    env = gpu_phase.probe_env(bench) if args.in_process else gpu_phase.env_isolated(_child_command(), bench)
    if env.device is None:
        print(f"{PROG}: no GPU found ({env.note}); nothing was run", file=sys.stderr)
        return 1
    if env.arch and env.arch != arch:
        print(f"{PROG}: warning: the candidates were compiled for {arch}, the GPU is {env.arch}", file=sys.stderr)
    copy = f"copy bandwidth {env.copy_gbs:.0f} GB/s" if env.copy_gbs else (env.note or "copy bandwidth not measured (--no-bench)")
    _log(f"{env.device} ({env.arch}), {copy}; {len(prepared)} candidate(s)")
    start = time.perf_counter()
    if args.in_process:
        results, peers = gpu_phase.run_in_process(prepared, refs, seeds, bench=bench, atol_rel=args.atol_rel,
                                                  compile_mode=_compile_mode(args))
    else:
        results, peers = gpu_phase.run_isolated([*_child_command(), "--from", str(prep_dir)], prep_dir, prepared,
                                                bench=bench, atol_rel=args.atol_rel,
                                                compile_mode=_compile_mode(args), timeout_s=args.child_timeout,
                                                positions=positions, gpus=args.gpus)
    _log(f"GPU phase: {time.perf_counter() - start:.1f} s")
    write_report(args.report, results, peers, env, seeds, args.atol_rel)
    _log(counts_line(results))
    print_summary(summarize(results, peers, env.copy_gbs), env)
    _log(f"report written to {args.report}")
    return 0 if all(r.status in ("ok", "rejected") for r in results) else 1


if __name__ == "__main__":
    main()
