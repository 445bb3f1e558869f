"""Hand-written threadblock graphs keep their grid and block size through the default pipeline.

The plans (test/data/split_k_grid_sum_*.mlir) are split-K grid-sum graphs of rms_norm(X) @ W
written by hand, as the GPU experiments of benchmarks/EXPERIMENTS.md wrote them."""

from pathlib import Path

import pytest

from mirage_xdsl.driver.compile import make_context
from mirage_xdsl.passes.pipeline import MirageTranspilePass
from mirage_xdsl.tools.mirage_run import load_module

DATA = Path(__file__).parents[1] / "data"


@pytest.mark.parametrize(
    ("stem", "grid", "threads"),
    [("split_k_grid_sum_bs1_512_threads", (32, 4), 512), ("split_k_grid_sum_bs8_128_threads", (64, 4), 128)],
)
def test_split_k_plan_lowers_with_its_grid(stem: str, grid: tuple[int, int], threads: int) -> None:
    module = load_module(DATA / f"{stem}.mlir")
    module.verify()
    MirageTranspilePass().apply(make_context(), module)
    kernel = next(op for op in module.walk() if op.name == "cute.kernel")
    assert tuple(kernel.grid[:2]) == grid
    assert kernel.num_threads == threads
    assert any(op.name == "cute.grid_sum" for op in kernel.walk())
