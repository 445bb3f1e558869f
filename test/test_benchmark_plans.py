"""The hand-written plans of benchmarks/plans/ (the experiments behind benchmarks/results/)
stay valid IR that the default pipeline lowers, so their records can be re-run."""

import importlib.util
import sys
from pathlib import Path

import pytest

from mirage_xdsl.driver.compile import make_context
from mirage_xdsl.driver.nvcc import compile_cuda, find_nvcc
from mirage_xdsl.passes.pipeline import MirageTranspilePass
from mirage_xdsl.tools.mirage_run import load_module

PLANS_DIR = Path(__file__).resolve().parents[1] / "benchmarks" / "plans"


def _generator(name: str):
    # the scripts import each other as they do when run from their directory
    if str(PLANS_DIR) not in sys.path:
        sys.path.insert(0, str(PLANS_DIR))
    spec = importlib.util.spec_from_file_location(name, PLANS_DIR / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", ["lone_block_plans", "split_k_plans"])
def test_every_plan_parses_and_verifies(tmp_path: Path, name: str) -> None:
    _generator(name).main(tmp_path)
    files = sorted(tmp_path.glob("*.mlir"))
    assert len(files) == len(_generator(name).PLANS)
    for path in files:
        load_module(path).verify()


@pytest.mark.parametrize(("plan", "grid", "threads"), [((1, 192, 4, 64, 512), (32, 4), 512), ((8, 96, 4, 64, 128), (64, 4), 128)])
def test_split_k_plan_lowers_with_its_grid(tmp_path: Path, plan: tuple[int, ...], grid: tuple[int, int], threads: int) -> None:
    name, text = _generator("split_k_plans").plan(*plan)
    path = tmp_path / f"{name}.mlir"
    path.write_text(text)
    module = load_module(path)
    MirageTranspilePass().apply(make_context(), module)
    kernel = next(op for op in module.walk() if op.name == "cute.kernel")
    assert tuple(kernel.grid[:2]) == grid
    assert kernel.num_threads == threads
    assert any(op.name == "cute.grid_sum" for op in kernel.walk())


@pytest.mark.skipif(find_nvcc() is None, reason="nvcc not installed")
def test_intra_block_split_k_kernels_build(tmp_path: Path) -> None:
    """The hand-written kernels of intra-block-split-k-h200-2026-11-25.md still build against
    the device library, one tile width each, and every recorded configuration fits an SM."""
    script = _generator("intra_block_split_k")
    header = (PLANS_DIR / "intra_block_split_k.cuh").read_text()
    widths = sorted({n for _, n, *_ in script.CONFIGS})
    src = header + "".join(f"\nIBSK_KERNEL(ibsk_n{n}, {n}, 4, 64, 2)" for n in widths) + "\n"
    cubin = compile_cuda(src, "sm_90", cache_dir=tmp_path).read_bytes()
    assert all(f"ibsk_n{n}".encode() in cubin for n in widths)
    assert all(script.smem_bytes(n, kw, s) <= 232448 for _, n, kw, _, s, _ in script.CONFIGS)


@pytest.mark.skipif(find_nvcc() is None, reason="nvcc not installed")
def test_late_finisher_split_k_kernels_build(tmp_path: Path) -> None:
    """The hand-written kernels of late-finisher-split-k-h200-2026-11-25.md still build against
    the device library (the fastest configuration and the equal-split control), and every
    recorded configuration keeps three blocks per SM (232448 B of shared memory per SM on an
    H100/H200, 1 KiB reserved per block)."""
    script = _generator("late_finisher_split_k")
    header = (PLANS_DIR / "late_finisher_split_k.cuh").read_text()
    src = script.kernel_source(header, "lfsk_fast", (15, 15, 15), 7, 1, "mlw")
    src = script.kernel_source(src, "lfsk_control", (16, 16, 16), 5, 0, "")
    cubin = compile_cuda(src, "sm_90", cache_dir=tmp_path).read_bytes()
    assert b"lfsk_fast" in cubin and b"lfsk_control" in cubin
    assert all(3 * (script.smem_bytes(s) + 1024) <= 232448 for _, s, _, _ in script.CONFIGS)
