"""Hand-written kernels as extra candidates of a `mirage-bench --prepare-only` directory.

The experiments of this folder time CUDA written by hand beside a plan the compiler prepared
(same inputs, reference and check): each kernel is built here with the project's nvcc options
and gets a copy of that plan with its own launch.  `mirage-bench --from DIR` then checks and
times it like any other candidate.
"""
import json
from pathlib import Path
from typing import Any

from mirage_xdsl.driver.nvcc import compile_cuda


class PreparedWorkload:
    """One workload's directory in a prepared bench directory, with the candidate `base_graph`
    (e.g. "rmsnorm_linear_bs8@c0xr") as the template of the added ones."""

    def __init__(self, prep: Path, workload: str, base_graph: str) -> None:
        self.prep, self.workload = prep, workload
        self.manifest = json.loads((prep / "manifest.json").read_text())
        self.base = next(c for c in self.manifest["candidates"] if c["graph"] == base_graph)
        self.plan = json.loads((prep / self.base["plan_json"]).read_text())
        self.graph = base_graph.split("@")[0]

    def add(self, tag: str, kernel: str, src: str, *, launch: dict[str, Any], counters: int = 0) -> None:
        """Build `src` (sm_90) and add it as candidate `<graph>@<tag>` running `kernel` with
        `launch` (grid, block, smem_bytes, one_wave, ...) over the base plan's inputs and
        outputs, plus the plan's counter buffer of `counters` words when there are any."""
        stem = f"{self.graph}_{tag}".replace("-", "_")
        folder = self.prep / self.workload
        (folder / f"{stem}.cubin").write_bytes(Path(compile_cuda(src, "sm_90")).read_bytes())
        plan = json.loads(json.dumps(self.plan))
        plan.update(workspace_bytes=0, counters=counters)
        step = plan["steps"][0]
        step.update(kernel=kernel, pdl=True, **launch)
        step["args"] = [a for a in step["args"] if a["kind"] in ("input", "output")]
        if counters:
            step["args"].append(dict(kind="counters", index=0, offset=0, spec=None))
        (folder / f"{stem}.plan.json").write_text(json.dumps(plan))
        self.manifest["candidates"].append(dict(self.base, graph=f"{self.graph}@{tag}", plan_json=f"{self.workload}/{stem}.plan.json",
                                                cubin=f"{self.workload}/{stem}.cubin", dup_of=None, cached=False))

    def save(self) -> None:
        (self.prep / "manifest.json").write_text(json.dumps(self.manifest, indent=1))
