"""References computed in the GPU phase (`mirage-bench --prepare-only DIR --refs-on-device`).

The suite's outputs are large (a 4096 x 4096 softmax: 64 MiB of float32 reference; the
suite's references together about 1.3 GB), too large to carry to a device machine in a
prepared directory.  With `--refs-on-device` the CPU phase saves plans and cubins only, and
records per candidate the graph's file (`Prepared.source`, relative to the package root when
inside it) and that file's sha256 (`Prepared.source_sha`); the GPU phase then computes each
workload's float64 references itself, in its child process, from the same file, seed and
input specs (`prepare._reference_one`, the CPU phase's own function).  That needs xDSL on the
device machine (tools/device_check.sh installs it from the carried wheels); without it, or
when the file changed since the CPU phase, the candidates get an error naming the cause.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from mirage_xdsl.bench.check import same_outputs
from mirage_xdsl.bench.prepare import Prepared

PACKAGE_ROOT = Path(__file__).resolve().parents[1]
"""The `mirage_xdsl` package directory (the repository root)."""


def source_of(path: Path) -> str:
    """How a candidate's file is recorded (`Prepared.source`): relative to the package root
    when inside it (the device machine has its own checkout), else absolute."""
    resolved = Path(path).resolve()
    try:
        return str(resolved.relative_to(PACKAGE_ROOT))
    except ValueError:
        return str(resolved)


def _graph_index(path: str, graph: str) -> int:
    """Index of candidate `graph` (`graph_<i>` of a muGraph file, `<func>[@<variant>]` of a
    plain graph) among the functions of the file at `path`."""
    if path.endswith(".json"):
        return int(graph.removeprefix("graph_"))
    from mirage_xdsl.bench.prepare import _function_names

    return _function_names(path).index(graph.split("@", 1)[0])


def fill_references(
    cands: Sequence[Prepared], refs: dict[str, list[list[np.ndarray]]], seeds: dict[str, int]
) -> None:
    """Compute the references of `cands` that have none (`ref_key` None, a plan, no error):
    one per (file, graph, input specs), appended to `refs[workload]` (distinct outputs only)
    and indexed by each candidate's `ref_key`.  A candidate whose reference cannot be
    computed gets `error` set instead (no xDSL, a changed or missing file, a reference
    failure).  Never raises."""
    from mirage_xdsl.bench.prepare import _reference_one, _specs_json, one_line

    computed: dict[tuple[str, int, str], tuple[list[np.ndarray] | None, str | None]] = {}
    for prep in cands:
        if prep.ref_key is not None or prep.error is not None or prep.plan_json is None:
            continue
        if prep.source is None:
            prep.error = "no reference: the prepared directory has none and names no source file"
            continue
        path = Path(prep.source) if Path(prep.source).is_absolute() else PACKAGE_ROOT / prep.source
        try:
            if prep.source_sha is not None and hashlib.sha256(path.read_bytes()).hexdigest() != prep.source_sha:
                prep.error = f"reference: {prep.source} changed since the CPU phase (prepare again)"
                continue
            index = _graph_index(str(path), prep.graph)
        except Exception as err:  # noqa: BLE001 - no xDSL, a missing file: the candidate's error
            prep.error = f"reference: {one_line(err)}"
            continue
        specs = _specs_json(prep.plan_json)
        key = (str(path), index, specs)
        if key not in computed:
            computed[key] = _reference_one(str(path), index, seeds[prep.workload], specs)
        got, error = computed[key]
        if got is None:
            prep.error = error
            continue
        known = refs.setdefault(prep.workload, [])
        prep.ref_key = next((k for k, r in enumerate(known) if same_outputs(got, r, 1e-6)), None)
        if prep.ref_key is None:
            prep.ref_key = len(known)
            known.append(got)
