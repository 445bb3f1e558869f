"""The summary per workload and the tables of `mirage-bench`: markdown (the committed record)
and a short terminal table.

Summary columns, per workload:

- best ours µs (candidate): the fastest candidate that passed the check, by device time
  (`ours dev`: CUDA-graph replay over rotated inputs; for plans CuPy cannot capture, the
  CUDA-graph-mode call, marked †);
- best saved Mirage µs: the fastest passing graph of the saved muGraph file; best plain µs:
  the fastest passing tuning variant of the plain kernel graph (our kn-fuse kernels);
- torch eager / torch graph / torch.compile µs (peers.py), best peer = the fastest of them;
- speedup = best peer µs / best ours µs (> 1: ours is faster);
- MB moved = the allocated bytes of the inputs and outputs of the best candidate / 1e6 (the
  least a kernel must read and write); GB/s = those bytes / best ours time / 1e9; % of copy
  BW = that / the measured device-to-device copy bandwidth.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from mirage_xdsl.bench.check import tolerance
from mirage_xdsl.bench.gpu_phase import EnvInfo, Result
from mirage_xdsl.bench.peers import COMPILE_MODE, PEERS, PeerTimes
from mirage_xdsl.bench.timing import SWEEP_LAUNCHES


def _f(value: float | None, spec: str) -> str:
    if value is None:
        return "-"
    if math.isinf(value) or math.isnan(value):
        return "inf"
    return format(value, spec)


@dataclass
class Summary:
    """One workload's best numbers.  Times in µs, bandwidths in GB/s (1e9 bytes/s)."""

    workload: str
    best: Result | None
    best_mugraph: Result | None
    best_plain: Result | None
    peers: PeerTimes | None
    copy_gbs: float | None
    candidates: int = 0
    passed: int = 0

    @property
    def best_us(self) -> float | None:
        """µs of the best candidate (its `Result.time_us`), None when none passed."""
        return self.best.time_us if self.best is not None else None

    @property
    def best_peer(self) -> tuple[str, float] | None:
        """(peer name, µs) of the fastest peer that has a time."""
        if self.peers is None:
            return None
        timed = [(us, name) for name, us in self.peers.times().items() if us is not None]
        return (min(timed)[1], min(timed)[0]) if timed else None

    @property
    def speedup(self) -> float | None:
        """best peer µs / best ours µs (> 1: ours is faster)."""
        peer = self.best_peer
        if peer is None or not self.best_us:
            return None
        return peer[1] / self.best_us

    @property
    def bytes_moved(self) -> int | None:
        """Allocated input + output bytes of the best candidate."""
        return self.best.bytes if self.best is not None else None

    @property
    def achieved_gbs(self) -> float | None:
        """bytes moved / best ours time, in GB/s."""
        if self.bytes_moved is None or not self.best_us:
            return None
        return self.bytes_moved / (self.best_us * 1e-6) / 1e9

    @property
    def copy_fraction(self) -> float | None:
        """achieved GB/s / copy GB/s (0..1, a fraction, not a percentage)."""
        if self.achieved_gbs is None or not self.copy_gbs:
            return None
        return self.achieved_gbs / self.copy_gbs


def _fastest(results: Sequence[Result]) -> Result | None:
    timed = [r for r in results if r.status == "ok" and r.time_us is not None]
    return min(timed, key=lambda r: r.time_us) if timed else None  # type: ignore[arg-type,return-value]


def summarize(results: Sequence[Result], peers: dict[str, PeerTimes], copy_gbs: float | None) -> list[Summary]:
    """One `Summary` per workload, in the order the results came."""
    out = []
    for workload in dict.fromkeys(r.workload for r in results):
        mine = [r for r in results if r.workload == workload]
        out.append(
            Summary(
                workload,
                best=_fastest(mine),
                best_mugraph=_fastest([r for r in mine if r.kind == "mugraph"]),
                best_plain=_fastest([r for r in mine if r.kind != "mugraph"]),
                peers=peers.get(workload),
                copy_gbs=copy_gbs,
                candidates=len(mine),
                passed=sum(r.status == "ok" for r in mine),
            )
        )
    return out


def _named(r: Result | None) -> str:
    if r is None or r.time_us is None:
        return "-"
    mark = "" if r.ours_dev_us is not None else "†"
    return f"{r.time_us:.1f}{mark} ({r.graph})"


SUMMARY_HEADER = (
    "| workload | best ours µs (candidate) | best saved Mirage µs (candidate) | best plain-graph variant µs (candidate) "
    "| torch eager µs | torch graph µs | torch.compile µs | best peer µs | speedup | MB moved | GB/s | % of copy BW |"
)


def summary_rows(summaries: Sequence[Summary]) -> list[str]:
    """The markdown summary table (header included)."""
    lines = [SUMMARY_HEADER, "|" + "---|" * 12]
    for s in summaries:
        times = s.peers.times() if s.peers is not None else dict.fromkeys(PEERS)
        peer = s.best_peer
        lines.append(
            f"| {s.workload} | {_named(s.best)} | {_named(s.best_mugraph)} | {_named(s.best_plain)} | "
            f"{_f(times['torch eager'], '.1f')} | {_f(times['torch graph'], '.1f')} | {_f(times['torch.compile'], '.1f')} | "
            f"{f'{peer[1]:.1f} ({peer[0]})' if peer else '-'} | {_f(s.speedup, '.3f')}{'x' if s.speedup else ''} | "
            f"{_f(s.bytes_moved / 1e6 if s.bytes_moved is not None else None, '.2f')} | {_f(s.achieved_gbs, '.0f')} | "
            f"{_f(s.copy_fraction * 100 if s.copy_fraction is not None else None, '.0f')} |"
        )
    return lines


def header_lines(env: EnvInfo, date: str | None = None) -> list[str]:
    """Date, device, versions, copy bandwidth."""
    date = date or _dt.datetime.now().isoformat(timespec="seconds")
    device = f"{env.device} ({env.arch})" if env.device else (env.note or "no GPU")
    copy = (
        f"{env.copy_gbs:.0f} GB/s (device-to-device copy of 1 GiB, bytes read + written, median of 30)"
        if env.copy_gbs
        else f"not measured{f' ({env.note})' if env.note else ''}"
    )
    return [
        f"- Date: {date}",
        f"- Device: {device}",
        f"- CuPy {env.cupy or '-'}, CUDA runtime {env.cuda_runtime or '-'}, torch {env.torch or '-'}, triton {env.triton or '-'}",
        f"- Copy bandwidth: {copy}",
    ]


def _compile_modes(peers: dict[str, PeerTimes]) -> str:
    """The torch.compile mode(s) the peers were measured in, for the report's timing line
    (`COMPILE_MODE` when no workload recorded one)."""
    modes = sorted({t.compile_mode for t in peers.values() if t.compile_mode}) or [COMPILE_MODE]
    return " / ".join(repr(m) for m in modes)


def _gpu_line(peers: dict[str, PeerTimes]) -> list[str]:
    """The report line naming the GPU of each workload when the run spread them over several
    (`mirage-bench --gpus`), else nothing."""
    gpus = {w: t.gpu for w, t in peers.items() if t.gpu is not None}
    if len({*gpus.values()}) < 2:
        return []
    listed = ", ".join(f"{w} {g}" for w, g in gpus.items())
    return [
        f"- GPUs: the workloads ran {len({*gpus.values()})} at a time, each on one GPU of this machine with its torch "
        f"peers (same model; ratios are per GPU): {listed}."
    ]


def write_report(
    path: Path,
    results: Sequence[Result],
    peers: dict[str, PeerTimes],
    env: EnvInfo,
    seeds: dict[str, int],
    atol_rel: float,
    *,
    date: str | None = None,
) -> str:
    """Write the markdown report (summary, peer notes, per-candidate table) to `path`;
    returns its text.

    Args:
        path: the report file (its folder is created).
        results: every candidate's result, in report order.
        peers: workload -> the times of its torch peers.
        env: the device and software of the GPU phase.
        seeds: workload -> the seed of its check inputs.
        atol_rel: the pass threshold of the check (max|out - ref| / max|ref|).
        date: the date line (None: now, ISO 8601).

    Raises:
        OSError: the report cannot be written.
    """
    summaries = summarize(results, peers, env.copy_gbs)
    lines = ["# mirage-bench", ""] + header_lines(env, date) + [
        f"- Check: NaN-poisoned outputs, seeded random inputs uniform(-0.5, 0.5) per workload (seeds {json.dumps(seeds)}), "
        f"error = max|out - ref| / max|ref| against the float64 reference executor, pass at {atol_rel:g} "
        f"({tolerance(atol_rel, ['bfloat16']):g} for bf16 outputs); "
        "the peers are checked the same way.",
        "- Timing: CUDA events, warm-up, median of 60 sweeps over rotated input sets (about 3x the L2 per sweep). "
        f"'ours dev' and 'torch graph' / 'torch.compile' = one CUDA graph of {SWEEP_LAUNCHES} or more runs over the input "
        "sets in turn, replayed, per run; "
        f"torch.compile uses mode={_compile_modes(peers)} inside our CUDA graph; 'torch eager' and 'ours' = eager calls.",
        *_gpu_line(peers),
        "",
        "## Summary",
        "",
        *summary_rows(summaries),
        "",
        "speedup = best peer / best ours, from the unrounded times (3 decimals: a ratio near a target is not rounded up); "
        "MB moved = allocated input + output bytes of the best candidate; "
        "GB/s = MB moved / best ours time; † = no device time (a cuBLAS call CuPy cannot capture): CUDA-graph-mode call.",
    ]
    notes = []
    for s in summaries:
        if s.peers is None:
            continue
        for name in PEERS:
            if name in s.peers.notes:
                notes.append(f"- {s.workload} {name}: {s.peers.notes[name]}")
        if s.peers.compile_s is not None:
            notes.append(f"- {s.workload} torch.compile took {s.peers.compile_s:.0f} s")
    if notes:
        lines += ["", "Peers:", ""] + notes
    lines += [
        "",
        "## Every candidate",
        "",
        "| workload | file | graph | status | max rel error | ours µs | ours graph µs | ours dev µs | MB | kernels | prep s |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        graph = r.graph + (f" (= {r.dup_of})" if r.dup_of else "")
        lines.append(
            f"| {r.workload} | {r.file} | {graph} | {r.status} | {_f(r.error, '.2e')} | {_f(r.ours_us, '.1f')} | "
            f"{_f(r.ours_graph_us, '.1f')} | {_f(r.ours_dev_us, '.1f')} | {_f(r.bytes / 1e6 if r.bytes else None, '.2f')} | "
            f"{r.kernels} | {r.prep_s:.1f} |"
        )
    errors = [r for r in results if r.message and not r.dup_of]
    if errors:
        lines += ["", "Errors:", ""] + [f"- {r.workload} {r.file} {r.graph}: {r.message}" for r in errors]
    lines += ["", counts_line(results)]
    text = "\n".join(lines) + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return text


def counts_line(results: Sequence[Result]) -> str:
    """The report's last line: how many candidates passed and how many were rejected."""
    passed = sum(r.status == "ok" for r in results)
    rejected = sum(r.status == "rejected" for r in results)
    return f"{passed} of {len(results)} candidates passed; {rejected} rejected at compile time (shared memory)."


def print_summary(summaries: Sequence[Summary], env: EnvInfo) -> None:
    """The short terminal table (µs, GB/s)."""
    print(f"{env.device or 'no GPU'}; copy bandwidth {_f(env.copy_gbs, '.0f')} GB/s")
    cols = (
        f"{'workload':<12} {'ours':>7} {'mirage':>7} {'plain':>7} {'eager':>7} {'graph':>7} {'compile':>7} "
        f"{'speedup':>7} {'MB':>7} {'GB/s':>6} {'%copy':>5}  best candidate"
    )
    print(cols)
    for s in summaries:
        t = s.peers.times() if s.peers is not None else dict.fromkeys(PEERS)
        print(
            f"{s.workload:<12} {_f(s.best_us, '.1f'):>7} {_f(s.best_mugraph.time_us if s.best_mugraph else None, '.1f'):>7} "
            f"{_f(s.best_plain.time_us if s.best_plain else None, '.1f'):>7} {_f(t['torch eager'], '.1f'):>7} "
            f"{_f(t['torch graph'], '.1f'):>7} {_f(t['torch.compile'], '.1f'):>7} {_f(s.speedup, '.3f'):>7} "
            f"{_f(s.bytes_moved / 1e6 if s.bytes_moved is not None else None, '.2f'):>7} {_f(s.achieved_gbs, '.0f'):>6} "
            f"{_f(s.copy_fraction * 100 if s.copy_fraction is not None else None, '.0f'):>5}  "
            f"{s.best.graph if s.best else '-'} ({s.passed}/{s.candidates} ok)"
        )
