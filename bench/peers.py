"""The torch peers of a workload, timed in the same process as our kernels, on the same
rotated input sets and the same way (timing.py):

- `torch eager`: the workload's torch program called eagerly, CUDA events around sweeps
  through the input sets (like "ours", the eager call of our compiled graph);
- `torch graph`: the program captured into one CUDA graph of the same runs as "ours dev"
  (the input sets in turn, `timing.sweep_sets`), replayed;
- `torch.compile`: `torch.compile(program, mode="max-autotune-no-cudagraphs")`, compiled once
  per workload, then captured into such a graph like `torch graph`.
  Not `mode="max-autotune"`: its CUDA-graph trees copy every input that is not a static
  address (all of ours: the sets rotate) into static buffers before each replay, which would
  charge the rotated weights an extra device copy that neither we nor the other peers pay.

Each peer is first checked on the workload's seeded inputs against the float64 reference
(the same max|out - ref| / max|ref| rule as ours); a peer that fails (no torch, capture or
compile error, wrong result) gets no time and a one-line reason.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

PEERS = ("torch eager", "torch graph", "torch.compile")
COMPILE_MODE = "max-autotune-no-cudagraphs"
COMPILE_MODES = (COMPILE_MODE, "default")
"""The torch.compile modes `mirage-bench --compile-mode` offers: those that leave CUDA graphs
to us (the module docstring says why not `max-autotune`)."""


@dataclass
class PeerTimes:
    """Per peer: µs per call (None: no time, see `notes`), relative error on the check."""

    eager_us: float | None = None
    graph_us: float | None = None
    compile_us: float | None = None
    errors: dict[str, float] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)
    """peer name -> one-line reason it has no time"""
    compile_s: float | None = None
    """seconds torch.compile took, warm-up call included"""
    compile_mode: str | None = None
    """the torch.compile mode the `torch.compile` time was measured in"""
    gpu: int | None = None
    """the GPU index (of `mirage-bench --gpus N`) that timed this workload and ours; None: one GPU"""

    def times(self) -> dict[str, float | None]:
        """Peer name (`PEERS`) -> µs per call, None where the peer has no time."""
        return {"torch eager": self.eager_us, "torch graph": self.graph_us, "torch.compile": self.compile_us}


def _one_line(err: BaseException) -> str:
    lines = [ln.strip() for ln in str(err).strip().splitlines() if ln.strip()]
    return f"{type(err).__name__}: {lines[0] if lines else ''}"[:200]


def _host(t: Any) -> np.ndarray:
    return t.detach().float().cpu().numpy().astype(np.float64)


def time_peers(
    cupy: Any,
    program_name: str,
    specs: Sequence[Any],
    sets: Sequence[Sequence[Any]],
    check_inputs: Sequence[Any] | None,
    refs: Sequence[np.ndarray] | None,
    *,
    atol_rel: float,
    compile_mode: str | None = COMPILE_MODE,
    log: Any = None,
) -> PeerTimes:
    """Time the torch peers of the workload `program_name` on `sets` (CuPy arrays laid out as
    `specs`, plan TensorSpecs), after checking each on `check_inputs` (CuPy arrays of the
    seeded inputs) against `refs`; `compile_mode`: the torch.compile mode of the
    `torch.compile` peer (None leaves that peer out).  Never raises: failures become `notes`."""
    from mirage_xdsl.bench.check import relative_error
    from mirage_xdsl.bench.timing import bench_us, sweep_sets, sweep_us, torch_sweep_graph
    from mirage_xdsl.bench.workloads import torch_workload_program

    out = PeerTimes()

    def fail(peers: Sequence[str], why: str) -> PeerTimes:
        for p in peers:
            out.notes.setdefault(p, why)
        return out

    try:
        import torch  # type: ignore[import-not-found]
    except ImportError as err:
        return fail(PEERS, f"torch is not installed ({err})")
    from mirage_xdsl.runtime.interop import external_stream, to_torch

    fn = torch_workload_program(program_name)
    if fn is None:
        return fail(PEERS, f"no torch program known for '{program_name}'")
    tsets = [[to_torch(cupy, x, s.dtype) for x, s in zip(xs, specs)] for xs in sets]
    tcheck = [to_torch(cupy, x, s.dtype) for x, s in zip(check_inputs, specs)] if check_inputs is not None else None
    tstream = external_stream(cupy, torch.cuda.current_stream().cuda_stream)
    n_sets = len(tsets)
    runs = sweep_sets(tsets)  # the sets in turn, as the graph of `ours dev` runs them

    def check(name: str, f: Any) -> bool:
        if tcheck is None or refs is None:
            return True
        got = f(*tcheck)
        err = relative_error([_host(t) for t in (got if isinstance(got, tuple | list) else (got,))], refs)
        out.errors[name] = err
        if not err <= atol_rel:
            out.notes[name] = f"wrong result: error {err:.2e} > {atol_rel:g} against the reference"
            return False
        return True

    with torch.no_grad():
        try:
            if check("torch eager", fn):
                out.eager_us = bench_us(lambda i: fn(*tsets[i]), n_sets, tstream)
        except Exception as err:  # noqa: BLE001 - reported as the peer's note
            out.notes["torch eager"] = _one_line(err)
        if "torch eager" in out.notes:
            return fail(("torch graph", "torch.compile"), "the torch program failed eagerly")
        try:
            replay = torch_sweep_graph(fn, runs)
            out.graph_us = sweep_us(replay, len(runs), tstream)
            del replay
        except Exception as err:  # noqa: BLE001
            out.notes["torch graph"] = _one_line(err)
        if compile_mode is None:
            return fail(("torch.compile",), "skipped (--no-compile-peer)")
        try:
            if log is not None:
                log(f"torch.compile(mode={compile_mode!r}) of {program_name} ...")
            start = time.perf_counter()
            compiled = torch.compile(fn, mode=compile_mode, dynamic=False)
            compiled(*tsets[0])
            torch.cuda.synchronize()
            out.compile_s = time.perf_counter() - start
            out.compile_mode = compile_mode
            if check("torch.compile", compiled):
                replay = torch_sweep_graph(compiled, runs)
                out.compile_us = sweep_us(replay, len(runs), tstream)
                del replay
        except Exception as err:  # noqa: BLE001
            out.notes["torch.compile"] = _one_line(err)
    return out


def contraction_peers(equation: str, compile_mode: str | None) -> dict[str, Any]:
    """The torch peers of a binary einsum: `torch.einsum`, `torch.matmul` when the einsum is
    a plain (batched) matmul of row-major operands (`cmk,ckn->cmn`, `mk,kn->mn`: cuBLAS with
    no permutes), and, with a `compile_mode`, `torch.compile` of the einsum in that mode
    (`COMPILE_MODE`, max-autotune: Triton GEMM templates tuned against cuBLAS; None: no such peer).  An einsum with
    an ELWISE_MUL factor (`lhs,rhs,out->out`) is `torch.einsum(lhs,rhs->out, a, b) * d`, and
    torch.compile compiles that function (Inductor may fuse the multiply into its GEMM).

    Raises:
        ImportError: no torch.
    """
    import torch  # type: ignore[import-not-found]

    inputs, out = equation.split("->")
    operands = inputs.split(",")
    lhs, rhs = operands[0], operands[1]
    binary = f"{lhs},{rhs}->{out}"

    def einsum(a: Any, b: Any, *mul: Any) -> Any:
        product = torch.einsum(binary, a, b)
        return product * mul[0] if mul else product

    peers: dict[str, Any] = {"torch.einsum": einsum}
    if len(operands) == 2 and len(lhs) == len(rhs) == len(out) >= 2 and lhs[:-2] == rhs[:-2] == out[:-2]:
        m, k, n = lhs[-2], lhs[-1], rhs[-1]
        if rhs[-2] == k and out[-2:] == m + n:
            peers["torch.matmul"] = torch.matmul
    if compile_mode is not None:
        peers["torch.compile"] = torch.compile(einsum, mode=compile_mode)
    return peers
