"""`mirage-bench REPORT --contractions`: our sm_90a contraction kernels against torch.

For each `ContractionWorkload` (bench/workloads.py): random inputs (torch, the workload's
dtype), our kernel compiled twice through `driver.einsum.compile_einsum` -- the pass's
grouped (L2) block order (`ours L2`) and the plain row-major order (`ours plain`,
group_m = 1) -- each checked against `torch.einsum` in fp32 (TF32 off) on a NaN-poisoned
output (max|out - ref| / max|ref| <= `atol_rel`), then timed as device time of CUDA-graph
replays (runtime/measure.py `sweep_us`; the torch peers with `timing.torch_sweep_graph`, the
same way), on two rotated input sets, a replay holding up to 16 runs (about 20 ms of work).  The report is one markdown table in TFLOP/s
(2 m n k batch / time) with ours / torch.einsum and ours / torch.matmul.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from mirage_xdsl.bench import BenchError
from mirage_xdsl.bench.workloads import CONTRACTION_WORKLOADS, CONTRACTIONS_BY_NAME, ContractionWorkload

SETS = 2
"""Input sets the timed CUDA graphs rotate through."""
ROUNDS = 3
"""Interleaved timing rounds (ours, peers, ours, ...); the median of the rounds is kept."""


@dataclass
class ContractionResult:
    """One workload's row: TFLOP/s by variant/peer (None: failed or skipped) and notes."""

    name: str
    equation: str
    tflops: dict[str, float | None] = field(default_factory=dict)
    errors: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def select_contractions(names: str | None) -> list[ContractionWorkload]:
    """The contraction workloads named in a comma-separated list (None: all).

    Raises:
        BenchError: an unknown name.
    """
    if not names:
        return list(CONTRACTION_WORKLOADS)
    picked = [n.strip() for n in names.split(",") if n.strip()]
    unknown = [n for n in picked if n not in CONTRACTIONS_BY_NAME]
    if unknown:
        raise BenchError(f"unknown contraction workloads {unknown}; known: {', '.join(CONTRACTIONS_BY_NAME)}")
    return [CONTRACTIONS_BY_NAME[n] for n in picked]


def _flops(w: ContractionWorkload) -> int:
    sizes = {c: s for ix, shape in zip(w.equation.split("->")[0].split(","), w.shapes) for c, s in zip(ix, shape)}
    total = 2
    for s in sizes.values():
        total *= s
    return total


VARIANTS: dict[str, dict[str, Any]] = {"ours L2": {}, "ours plain": {"group_m": 1}}
"""Our variants: label -> `compile_einsum` options (the pass's decisions; plain block order)."""


def run_workload(
    w: ContractionWorkload,
    *,
    compile_mode: str | None,
    atol_rel: float,
    log: Any = print,
    variants: dict[str, dict[str, Any]] | None = None,
) -> ContractionResult:
    """Check and time one workload (needs a GPU, torch and CuPy).  Never raises for a
    variant or peer that fails: the reason goes to `notes`.

    Args:
        variants: label -> `compile_einsum` options (default `VARIANTS`).
    """
    import cupy
    import torch

    from mirage_xdsl.bench.peers import contraction_peers
    from mirage_xdsl.bench.prepare import one_line
    from mirage_xdsl.bench.timing import sweep_us, torch_sweep_graph
    from mirage_xdsl.driver.einsum import compile_einsum
    from mirage_xdsl.runtime.measure import sweep_sets

    torch.backends.cuda.matmul.allow_tf32 = False
    res = ContractionResult(w.name, w.equation)
    dtype = {"float16": torch.float16, "bfloat16": torch.bfloat16}[w.dtype]
    gen = torch.Generator(device="cuda").manual_seed(1234)
    sets = [[torch.randn(s, device="cuda", dtype=dtype, generator=gen) for s in w.shapes] for _ in range(SETS)]
    first = sets[0]
    ref = contraction_peers(w.equation, None)["torch.einsum"](*(t.float() for t in first))
    scale = ref.abs().max().item()
    flops = _flops(w)
    # about 20 ms of device time per timed replay and 10 replays, at most 16 runs x 20 replays
    est_us = flops / 600e6
    launches = max(SETS, min(16, round(20000 / est_us)))
    runs = len(sweep_sets(sets, launches))
    reps = max(5, min(20, round(200000 / (est_us * runs))))
    timers: dict[str, Any] = {}
    stream = cupy.cuda.get_current_stream()
    cupy_sets = [[_cupy_view(cupy, torch, t) for t in s] for s in sets]
    variants = VARIANTS if variants is None else variants
    for label, options in variants.items():
        try:
            graph = compile_einsum(w.equation, w.shapes, w.dtype, poison_outputs=True, **options)
            (out,) = graph(*first)
            err = ((out.float() - ref).abs().max().item()) / scale
            res.errors[label] = err
            if not err <= atol_rel:
                res.notes.append(f"{label}: wrong result (error {err:.2e})")
                continue
            launch = graph.capture_sweep(sweep_sets(cupy_sets, launches))
            timers[label] = lambda f=launch: sweep_us(lambda: f(stream), runs, stream, warmup=2, reps=reps)
        except Exception as err:  # noqa: BLE001 - a failed variant is a note
            res.notes.append(f"{label}: {one_line(err)}")
    try:
        peers = contraction_peers(w.equation, compile_mode)
    except Exception as err:  # noqa: BLE001
        peers = {}
        res.notes.append(f"peers: {one_line(err)}")
    for name, fn in peers.items():
        try:
            peer_out = fn(*first)
            res.errors[name] = ((peer_out.float() - ref).abs().max().item()) / scale
            replay = torch_sweep_graph(fn, sweep_sets(sets, launches))
            timers[name] = lambda r=replay: sweep_us(r, runs, stream, warmup=2, reps=reps)
        except Exception as err:  # noqa: BLE001
            res.notes.append(f"{name}: {one_line(err)}")
    times: dict[str, list[float]] = {}
    for _ in range(ROUNDS):
        for name, timer in timers.items():
            us = timer()
            if us:
                times.setdefault(name, []).append(us)
    for name in [*variants, *peers]:
        res.tflops[name] = flops / statistics.median(times[name]) / 1e6 if name in times else None
    log(f"{w.name}: " + ", ".join(f"{k} {v:.1f}" for k, v in res.tflops.items() if v))
    return res


def probe(workloads: Sequence[ContractionWorkload], variants: dict[str, dict[str, Any]], names: Sequence[str] = ()) -> None:
    """Time `variants` of each workload named in `names` (all when empty) beside torch in this
    process, without torch.compile (`run_workload`, which logs the TFLOP/s), and print each
    workload's notes (wrong results, failed variants): the experiments/hopper_gemm probes.

    Raises:
        ImportError: CuPy or torch is missing (from `run_workload`).
    """
    for w in workloads:
        if not names or w.name in names:
            for note in run_workload(w, compile_mode=None, atol_rel=1e-2, variants=variants).notes:
                print("  note:", note)


def _cupy_view(cupy: Any, torch: Any, t: Any) -> Any:
    """A CuPy view of a torch CUDA tensor (bf16 as uint16, as the runtime stores it)."""
    if t.dtype == torch.bfloat16:
        return cupy.from_dlpack(t.view(torch.int16)).view(cupy.uint16)
    return cupy.from_dlpack(t)


def _fmt(x: float | None) -> str:
    return f"{x:.1f}" if x else "-"


def _ratio(r: ContractionResult, peer: str) -> str:
    ours, theirs = r.tflops.get("ours L2"), r.tflops.get(peer)
    return f"{ours / theirs:.2f}x" if ours and theirs else "-"


def report(results: Sequence[ContractionResult], device: str, date: str) -> str:
    """The markdown report of `run_workload` results (TFLOP/s; ratios of `ours L2`)."""
    peers = sorted({k for r in results for k in r.tflops if not k.startswith("ours")})
    head = ["workload", "einsum", "ours L2", "ours plain", *peers, "ours/einsum", "ours/matmul"]
    lines = [
        f"# Contractions on {device}, {date}",
        "",
        "TFLOP/s (2 x product of all index sizes / device time of CUDA-graph replays); "
        "`ours L2`: grouped block order chosen by convert-contraction-to-hopper, `ours plain`: row-major block order.",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    for r in results:
        row = [r.name, f"`{r.equation}`", _fmt(r.tflops.get("ours L2")), _fmt(r.tflops.get("ours plain"))]
        row += [_fmt(r.tflops.get(p)) for p in peers]
        row += [_ratio(r, "torch.einsum"), _ratio(r, "torch.matmul")]
        lines.append("| " + " | ".join(row) + " |")
    notes = [f"- {r.name}: {n}" for r in results for n in r.notes]
    if notes:
        lines += ["", "Notes:", *notes]
    return "\n".join(lines) + "\n"


def run(names: str | None, *, compile_mode: str | None, atol_rel: float, log: Any = print) -> str:
    """Run the selected contraction workloads in this process and return the report.

    Raises:
        BenchError: an unknown workload name.
    """
    import datetime

    import torch

    results = [run_workload(w, compile_mode=compile_mode, atol_rel=atol_rel, log=log) for w in select_contractions(names)]
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return report(results, torch.cuda.get_device_name(0), date)
