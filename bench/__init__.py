"""`mirage-bench`: compile, check and time every candidate of every shared workload against
its torch peers on one GPU (see tools/mirage_bench.py for the command line).

Modules, one concept each:

- `workloads`: the workload table (name -> saved Mirage muGraph file, plain-graph example,
  torch program) and file resolution.
- `prepare`: the CPU phase (pipeline, nvcc, float64 references in worker processes) and the
  prepared-directory format (`--prepare-only DIR` / `--from DIR`).
- `cache`: the on-disk cache of the CPU phase (keys, atomic entries).
- `check`: correctness helpers (relative error, host -> device copies, device input sets).
- `timing`: CUDA-event timing, L2 rotation, CUDA-graph sweeps, copy bandwidth.
- `peers`: the torch peers (eager, CUDA graph, torch.compile).
- `gpu_phase`: running, checking and timing candidates on the GPU, one child process per
  workload.
- `report`: the summary per workload and the markdown / terminal tables.
- `tune`: `mirage-bench --tune`, the genetic tuner (driver/tune/) on each workload's plain graph.
- `fuzz`: differential fuzzing of random kernel and threadblock graphs against the reference
  (`python -m mirage_xdsl.bench.fuzz`).

Nothing here imports xDSL, z3 or OR-tools at module import time: a device machine that only
has numpy, CuPy and torch can run the GPU phase from a prepared directory.
"""

from __future__ import annotations


class BenchError(Exception):
    """A user-facing error of `mirage-bench`: printed as one line, exit status 1."""
