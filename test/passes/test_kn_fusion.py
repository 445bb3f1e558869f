"""Graph-kernel fusion (kn-expand-composites, kn-simplify, kn-recognize-composites, kn-partition,
kn-fuse) on the example kernel graphs.

For every `examples/*.mlir`: kn-fuse yields one or two `kn.customized` ops and nothing else, the
result verifies, the reference executor gives the same outputs as on the plain graph (float64,
fresh random inputs, relative error < 1e-6), and `mirage-transpile` accepts the fused module.
The builder versions in `examples/build_examples.py` build the same programs.  The tuning
candidates and kn-partition's cut of a recomputing kernel: test_kn_fusion_tuning.py.
"""

from __future__ import annotations

import ctypes
import glob
import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from xdsl.context import Context
from xdsl.dialects.arith import Arith
from xdsl.dialects.builtin import ArrayAttr, Builtin, DictionaryAttr, ModuleOp
from xdsl.dialects.func import Func, FuncOp
from xdsl.parser import Parser

from mirage_xdsl.dialects import kn, tb
from mirage_xdsl.dialects.kn import Kernel
from mirage_xdsl.dialects.tb import Threadblock
from mirage_xdsl.passes.conversion.default_tb_graph import Planner
from mirage_xdsl.passes.conversion.kn_fuse import KnFusePass
from mirage_xdsl.passes.conversion.kn_partition import KnPartitionPass
from mirage_xdsl.passes.conversion.plan_analysis import analyse_axes, compute_phases
from mirage_xdsl.passes.conversion.plan_group import fusible_op, group_from_ops
from mirage_xdsl.passes.kn.expand_composites import KnExpandCompositesPass, KnRecognizeCompositesPass
from mirage_xdsl.passes.kn.simplify import KnSimplifyPass
from mirage_xdsl.passes.pipeline import MirageTranspilePass
from mirage_xdsl.reference.executor import run_reference
from mirage_xdsl.target.cost_model import DeviceModel

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
NAMES = sorted(p.stem for p in EXAMPLES.glob("*.mlir"))
ATTENTION = {"gqa", "gqa_bs8", "mha", "mqa"}
EXPECTED_KERNELS = {
    "gated_mlp": 1, "gqa": 2, "gqa_bs8": 2, "lora": 1, "mha": 2, "mqa": 2, "ntrans": 1, "rmsnorm_linear": 1,
    "rmsnorm_linear_bs8": 1, "softmax": 1,
    # flash decoding over chunks of the keys, 16 query rows per head, and the folded combine
    # writing into the output (passes/conversion/split_combine.py)
    "mha_stable": 2,
    # its 8 x 16 blocks of 64 query rows fill the SMs: one online-softmax (flash) kernel
    "attention_prefill": 1,
}
SMEM_LIMIT = 232448


# ---------------------------------------------------------------------------------------
# helpers


def _openblas_threads(n: int | None) -> int | None:
    """Set numpy's OpenBLAS thread count (best effort); return the previous count.

    Multi-threaded OpenBLAS is pathologically slow on this suite's small, skinny GEMMs on
    few-core machines (a [16, 4096] x [4096, 64] product: 0.26 s with threads, 0.8 ms without)."""
    import numpy

    libdir = os.path.join(os.path.dirname(os.path.dirname(numpy.__file__)), "numpy.libs")
    for path in glob.glob(os.path.join(libdir, "libscipy_openblas*.so*")):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for set_name, get_name in (
            ("scipy_openblas_set_num_threads64_", "scipy_openblas_get_num_threads64_"),
            ("scipy_openblas_set_num_threads", "scipy_openblas_get_num_threads"),
            ("openblas_set_num_threads", "openblas_get_num_threads"),
        ):
            if hasattr(lib, set_name) and hasattr(lib, get_name):
                prev = int(getattr(lib, get_name)())
                if n is not None:
                    getattr(lib, set_name)(ctypes.c_int(n))
                return prev
    return None


@pytest.fixture(scope="module", autouse=True)
def _single_threaded_blas() -> Iterator[None]:
    prev = _openblas_threads(1)
    yield
    if prev is not None:
        _openblas_threads(prev)


def _context() -> Context:
    ctx = Context()
    for dialect in (Builtin, Func, Arith, Kernel, Threadblock):
        ctx.load_dialect(dialect)
    if importlib.util.find_spec("mirage_xdsl.dialects.cute") is not None:
        from mirage_xdsl.dialects.cute import Cute

        ctx.load_dialect(Cute)
    return ctx


def parse(text: str) -> ModuleOp:
    return Parser(_context(), text).parse_module()


def example(name: str) -> ModuleOp:
    return parse((EXAMPLES / f"{name}.mlir").read_text())


def the_func(module: ModuleOp) -> FuncOp:
    (func,) = [op for op in module.ops if isinstance(op, FuncOp)]
    return func


def customized_ops(module: ModuleOp) -> list[kn.CustomizedOp]:
    return [op for op in the_func(module).body.block.ops if isinstance(op, kn.CustomizedOp)]


def random_inputs(module: ModuleOp, name: str, seed: int) -> list[np.ndarray]:
    """Fresh inputs in [-1, 1); attention inputs scaled to 0.25 (exp without max subtraction)."""
    rng = np.random.default_rng(seed)
    scale = 0.25 if name in ATTENTION else 1.0
    return [rng.uniform(-1.0, 1.0, kn.shape_of(a)) * scale for a in the_func(module).body.block.args]


def rel_err(a: list[np.ndarray], b: list[np.ndarray]) -> float:
    assert len(a) == len(b)
    return max(float(np.abs(x - y).max() / np.abs(x).max()) for x, y in zip(a, b))


def fuse(module: ModuleOp, **options: Any) -> ModuleOp:
    KnFusePass(**options).apply(_context(), module)
    module.verify()
    return module


_FUSED: dict[str, ModuleOp] = {}
_PLAIN_OUT: dict[str, tuple[list[np.ndarray], list[np.ndarray]]] = {}


def fused_example(name: str) -> ModuleOp:
    if name not in _FUSED:
        _FUSED[name] = fuse(example(name))
    return _FUSED[name]


def plain_reference(name: str) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """(inputs, outputs of the plain graph), computed once per example."""
    if name not in _PLAIN_OUT:
        plain = example(name)
        inputs = random_inputs(plain, name, seed=NAMES.index(name) + 11)
        _PLAIN_OUT[name] = (inputs, run_reference(plain, inputs))
    return _PLAIN_OUT[name]


# ---------------------------------------------------------------------------------------
# kn-fuse on every example


@pytest.mark.parametrize("name", NAMES)
def test_fuse_structure(name: str) -> None:
    module = fused_example(name)
    ops = [op for op in the_func(module).body.block.ops if op.name != "func.return"]
    kernels = customized_ops(module)
    assert len(kernels) == EXPECTED_KERNELS[name]
    views = [op for op in ops if op.name == "kn.reshape"]  # a folded combine's no-copy views
    assert len(ops) == len(kernels) + len(views), [op.name for op in ops]  # nothing but the fused kernels
    for k in kernels:
        assert k.attributes["kn.template"].data  # type: ignore[attr-defined]
        assert 0 < k.attributes["kn.smem_estimate"].value.data <= SMEM_LIMIT  # type: ignore[attr-defined]
        gx, gy, gz = k.grid
        assert 1 <= gx * gy * gz <= 4096
        # wide blocks: few-block matmul-free plans (ntrans) and register row chains (softmax: 64 rows of 4096 fp16, 8 elements per thread;
        # mha_stable's row max: 512 rows of 4096, a block per SM: 16 elements per thread)
        chain_rows = name == "mha_stable" and k.attributes["kn.template"].data == "rowwise"  # type: ignore[attr-defined]
        expected = 512 if name in ("ntrans", "softmax") else 256 if chain_rows else 128
        assert k.block == (expected, 1, 1)


@pytest.mark.parametrize("name", NAMES)
def test_fuse_equivalence(name: str) -> None:
    inputs, expected = plain_reference(name)
    got = run_reference(fused_example(name), inputs)
    assert rel_err(expected, got) < 1e-6


@pytest.mark.parametrize("name", NAMES)
def test_transpile_accepts_fused(name: str) -> None:
    module = fused_example(name).clone()
    try:
        MirageTranspilePass().apply(_context(), module)
        module.verify()
    except Exception as err:  # noqa: BLE001 - decide below whether convert-tb-to-cute is at fault
        module = fused_example(name).clone()
        MirageTranspilePass(to_cute=False).apply(_context(), module)
        module.verify()
        pytest.xfail(f"passes 1-9 accept the fused graph; convert-tb-to-cute failed: {err}")
    assert not customized_ops(module) or all("tb.smem_size" in k.attributes for k in customized_ops(module))


def test_rmsnorm_linear_kernel() -> None:
    """Without split-K plans: Mirage's best rmsnorm block graph (mirage-notes 2.3): grid
    over W's columns, for-loop over K, red_ld_rms of X beside matmul + nored, div after the
    loop."""
    (k,) = customized_ops(fuse(example("rmsnorm_linear"), grid_sum=False, always_split=False))
    assert k.grid == (384, 1, 1) and k.num_iterations == 16
    body = list(k.body.block.ops)
    assert [op.name for op in body] == [
        "tb.input", "tb.input", "tb.forloop_accum", "tb.matmul", "tb.forloop_accum", "tb.div", "tb.output"
    ]
    x, w = body[0], body[1]
    assert isinstance(x, tb.InputOp) and x.imap == (-1, -1, -1) and x.fdim == 1
    assert isinstance(w, tb.InputOp) and w.imap == (1, -1, -1) and w.fdim == 0
    assert kn.shape_of(x.result) == (2, 256) and kn.shape_of(w.result) == (256, 16)
    assert [op.accum_kind for op in body if isinstance(op, tb.ForloopAccumOp)] == ["red_ld_rms", "nored"]
    out = body[-1]
    assert isinstance(out, tb.OutputOp) and out.omap == (1, -1, -1)


def test_rmsnorm_linear_grid_sum_kernel() -> None:
    """The default plan: ONE kernel whose grid splits K too (96 column tiles x 4 K slices,
    64-column W tiles, 64-row K tiles: the estimate counts the weight ring that
    tb-plan-pipeline gives W); each block accumulates its K slice, tb.grid_sum adds the four
    partial matmul tiles and sums of squares, the last block of each column tile divides and
    stores."""
    (k,) = customized_ops(fused_example("rmsnorm_linear"))
    assert k.attributes["kn.template"].data == "split_k_grid_sum"  # type: ignore[attr-defined]
    assert k.grid == (96, 4, 1) and k.num_iterations == 16
    sums = [op for op in k.body.block.ops if isinstance(op, tb.GridSumOp)]
    assert len(sums) == 2 and {op.grid_axis for op in sums} == {1}
    assert sorted(op.input.owner.accum_kind for op in sums) == ["nored", "red_ld_sum"]  # type: ignore[union-attr]
    (out,) = [op for op in k.body.block.ops if isinstance(op, tb.OutputOp)]
    assert out.omap == (1, -1, -1) and kn.shape_of(k.results[0]) == (2, 6144)


@pytest.mark.parametrize("name", sorted(ATTENTION))
def test_attention_is_flash_decoding(name: str) -> None:
    """Kernel 1 splits KV over the grid and the for-loop, writes partial denominators and
    numerators along the last dim; kernel 2 sums them (strided to_dimx) and divides."""
    k1, k2 = customized_ops(fused_example(name))
    assert k1.attributes["kn.template"].data == "flash_decoding"  # type: ignore[attr-defined]
    assert k2.attributes["kn.template"].data == "split_reduce"  # type: ignore[attr-defined]
    assert list(k2.inputs) == list(k1.results)
    blocks = k1.grid[0] * k1.grid[1] * k1.grid[2]
    assert blocks >= 128
    kinds = sorted(op.accum_kind for op in k1.body.block.ops if isinstance(op, tb.ForloopAccumOp))
    assert kinds == ["nored", "red_ld_sum"]
    split_axis = [i for i, g in enumerate(k1.grid) if g > 1][-1]
    for out in (op for op in k1.body.block.ops if isinstance(op, tb.OutputOp)):
        assert out.omap[split_axis] == len(kn.shape_of(out.input)) - 1  # partials side by side
    names = [op.name for op in k2.body.block.ops]
    assert "tb.reduction_to_dimx" in names and "tb.div" in names
    assert k2.dimx == kn.shape_of(k2.results[0])[-1]  # sum_todimx down to the head dim


@pytest.mark.parametrize("name", ["gqa", "gqa_bs8", "mqa"])
def test_grouped_attention_walks_tall_register_chain_tiles(name: str) -> None:
    """Query heads that share their keys: blocks of 32 query rows walk 128-key tiles (P in
    registers, cute.mma_chain with two warp rows of two key groups; H200: gqa bs8 32.0 us
    against 35.0 with 16-row tiles, mqa 11.8 against 12.9, 2026-11-22)."""
    k = customized_ops(fused_example(name))[0]
    q, key = (op for op in k.body.block.ops if isinstance(op, tb.InputOp) and op.fdim != 1)
    assert kn.shape_of(q.result)[-2] == 32 and kn.shape_of(key.result)[-1] == 128


def test_lora_and_gated_mlp_share_operand() -> None:
    (lora,) = customized_ops(fused_example("lora"))
    assert lora.num_iterations == 1
    assert [op.name for op in lora.body.block.ops].count("tb.matmul") == 3
    (mlp,) = customized_ops(fused_example("gated_mlp"))
    x = next(op for op in mlp.body.block.ops if isinstance(op, tb.InputOp))
    users = [u.operation.name for u in x.result.uses]
    assert users == ["tb.matmul", "tb.matmul"]  # one X tile feeds both matmuls
    names = [op.name for op in mlp.body.block.ops]
    assert names.index("tb.silu") > names.index("tb.forloop_accum")


def test_ntrans_rowwise() -> None:
    (k,) = customized_ops(fused_example("ntrans"))
    assert k.grid == (8, 1, 1) and k.num_iterations == 1
    assert [op.name for op in k.body.block.ops].count("tb.rms_norm") == 2


# ---------------------------------------------------------------------------------------
# builder versions of the examples


def _load_build_examples() -> Any:
    spec = importlib.util.spec_from_file_location("build_examples", EXAMPLES / "build_examples.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _signature(module: ModuleOp) -> tuple:
    func = the_func(module)
    block = func.body.block
    names: dict[Any, str] = {a: f"arg{i}" for i, a in enumerate(block.args)}
    ops = []
    for i, op in enumerate(block.ops):
        ops.append(
            (
                op.name,
                tuple(names[v] for v in op.operands),
                tuple(sorted((k, str(v)) for k, v in op.properties.items())),
                tuple(str(r.type) for r in op.results),
            )
        )
        for j, r in enumerate(op.results):
            names[r] = f"v{i}.{j}"
    args = [(str(a.type), a.name_hint) for a in block.args]
    return func.sym_name.data, args, str(func.arg_attrs), ops


@pytest.mark.parametrize("name", NAMES)
def test_builder_builds_the_example(name: str) -> None:
    builders = _load_build_examples().EXAMPLES
    assert sorted(builders) == NAMES
    built = builders[name]()
    built.verify()
    assert _signature(built) == _signature(example(name))


# ---------------------------------------------------------------------------------------
# the passes one by one


@pytest.mark.parametrize("name", ["rmsnorm_linear", "gqa", "ntrans"])
def test_expand_simplify_recognize_preserve_semantics(name: str) -> None:
    inputs, expected = plain_reference(name)
    module = example(name)
    for p in (KnExpandCompositesPass(), KnSimplifyPass(), KnRecognizeCompositesPass()):
        p.apply(_context(), module)
        module.verify()
        assert rel_err(expected, run_reference(module, inputs)) < 1e-9
    names = [op.name for op in the_func(module).body.block.ops]
    if name == "ntrans":
        assert names.count("kn.rms_norm") == 2  # row-local norms folded back
    else:
        assert "kn.rms_norm" not in names
        last = [op for op in the_func(module).body.block.ops][-2]
        assert last.name == "kn.div"  # the division moved after the matmul
        assert last.attributes["kn.composite"].data in ("rms_norm_matmul", "softmax_matmul")  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", ["gqa", "rmsnorm_linear", "lora"])
def test_partition_alone_is_correct(name: str) -> None:
    """Without simplification the softmax division blocks the single-kernel plan; the fallback
    partition still produces a correct, transpilable graph."""
    inputs, expected = plain_reference(name)
    module = example(name)
    KnPartitionPass().apply(_context(), module)
    module.verify()
    assert customized_ops(module)
    assert rel_err(expected, run_reference(module, inputs)) < 1e-6
    MirageTranspilePass(to_cute=False).apply(_context(), module)


def test_no_split_option_and_smem_limit() -> None:
    inputs, expected = plain_reference("mqa")
    module = fuse(example("mqa"), allow_split=False)
    (k,) = customized_ops(module)
    assert rel_err(expected, run_reference(module, inputs)) < 1e-6
    small = fuse(example("rmsnorm_linear"), smem_limit=16384)
    for k in customized_ops(small):
        assert k.attributes["kn.smem_estimate"].value.data <= 16384  # type: ignore[attr-defined]
    inputs, expected = plain_reference("rmsnorm_linear")
    assert rel_err(expected, run_reference(small, inputs)) < 1e-6


def test_axes_and_phases() -> None:
    """Axis unification and the phase rule on the simplified / unsimplified attention."""
    module = example("gqa")
    ops = [op for op in the_func(module).body.block.ops if fusible_op(op)]
    group, outs = group_from_ops(ops)
    assert len(outs) == 1
    ax = analyse_axes(group)
    assert ax is not None
    # axes: batch (2), q rows (256), head dim (64, contracted by QK), kv (4096, summed)
    assert sorted(ax.extent.values()) == [2, 64, 64, 256, 4096]
    kv = next(a for a, e in ax.extent.items() if e == 4096)
    assert kv in ax.loopable()
    assert compute_phases(group, ax, kv) is None  # exp/sum/div then matmul: not one loop
    KnSimplifyPass().apply(_context(), module)
    ops = [op for op in the_func(module).body.block.ops if fusible_op(op)]
    group, _ = group_from_ops(ops)
    ax = analyse_axes(group)
    assert ax is not None
    kv = next(a for a, e in ax.extent.items() if e == 4096)
    ph = compute_phases(group, ax, kv)
    assert ph is not None and ph[group.outputs[0]] == "post"


def test_split_only_when_grid_too_small() -> None:
    """Without `always-split`: gated_mlp has >= 132 blocks unsplit: no split-K; gqa has 32 at
    most: flash decoding."""
    planner = Planner(DeviceModel(always_try_split=False))
    for name, kernels in (("gated_mlp", 1), ("gqa", 2)):
        module = example(name)
        for p in (KnExpandCompositesPass(), KnSimplifyPass(), KnRecognizeCompositesPass()):
            p.apply(_context(), module)
        ops = [op for op in the_func(module).body.block.ops if fusible_op(op)]
        group, _ = group_from_ops(ops)
        plan = planner.plan(group)
        assert plan is not None and len(plan.kernels) == kernels
        assert all(k.smem <= SMEM_LIMIT for k in plan.kernels)


def _group_of(name: str):
    module = example(name)
    for p in (KnExpandCompositesPass(), KnSimplifyPass(), KnRecognizeCompositesPass()):
        p.apply(_context(), module)
    ops = [op for op in the_func(module).body.block.ops if fusible_op(op)]
    group, _ = group_from_ops(ops)
    return group


def test_weight_ring_is_counted_for_wide_weight_tiles() -> None:
    """A plan whose for-loop streams a kn.weight input is costed with the ring that prefetches
    12 MiB over the grid (`plan_pipeline.prefetch_stages`): rmsnorm bs8's cheapest plan becomes the 96 x 4 split-K
    grid of 64-column W tiles and 16 iterations (15.4 µs on the H200, where the plan chosen
    without the ring, 48 x 8, took 17.4).  Tiles whose rows stream slowly (16 columns, 32 B)
    get no credit (and stream slower as weights: `weight_run_penalty`)."""
    text = (EXAMPLES / "rmsnorm_linear_bs8.mlir").read_text()
    plain = parse(text.replace(", kn.weight}", "}"))
    assert "kn.weight" in text and "kn.weight" not in str(plain)

    def costs(module: ModuleOp, device: DeviceModel | None = None) -> dict[tuple, float]:
        for p in (KnExpandCompositesPass(), KnSimplifyPass(), KnRecognizeCompositesPass()):
            p.apply(_context(), module)
        ops = [op for op in the_func(module).body.block.ops if fusible_op(op)]
        plans = Planner(device or DeviceModel()).candidates(group_from_ops(ops)[0])
        return {(fp.kernels[0].grid, fp.kernels[0].forloop_range, len(fp.kernels)): fp.cost_us for fp in plans}

    with_ring, without = costs(parse(text)), costs(plain)
    assert min(with_ring, key=with_ring.get) == ((96, 4, 1), 16, 1)
    assert min(without, key=without.get) == ((48, 8, 1), 8, 1)
    assert with_ring[((96, 4, 1), 16, 1)] < without[((96, 4, 1), 16, 1)] - 2.0
    same_speed = costs(parse(text), DeviceModel(weight_run_penalty=1.0))
    assert same_speed[((384, 1, 1), 32, 1)] == without[((384, 1, 1), 32, 1)]  # 16-column W tiles
    assert with_ring[((384, 1, 1), 32, 1)] > without[((384, 1, 1), 32, 1)]


def test_one_pass_plans_cost_their_mma_chain_not_latency_hiding() -> None:
    """A plan without a for-loop runs each block's MMAs once, after its loads: its MMA time is
    the deepest K chain (one warp's dependent m16n8k16 steps), not the loop model's rate scaled
    by resident warps.  LoRA's cheapest plan becomes 128 blocks of 32 W columns (3.2 µs on an
    H200 against 3.4 for the 256 blocks of 16 columns the hiding model preferred: these load
    X and A half as often)."""
    plans = Planner(DeviceModel()).candidates(_group_of("lora"))
    best = plans[0].kernels[0]
    assert best.grid == (128, 1, 1) and best.forloop_range == 1
    assert min(fp.cost_us for fp in plans if fp.kernels[0].grid == (256, 1, 1)) > plans[0].cost_us


def test_one_pass_blocks_alone_on_their_sm_do_not_overlap_load_and_mma() -> None:
    """Mirage's saved mha_bs8 graph 0 leaves its Q K^T matmul (K = 64) to kn-partition.  One
    block per SM, wave after wave, runs its loads and MMAs one after the other, so the estimate
    adds them: the matmul gets 4096 blocks of 35 KB (198 µs for the graph on an H200), not 1024
    blocks of 133 KB, one per SM (307 µs)."""
    from mirage_xdsl.driver.compile import prepare
    from mirage_xdsl.tools.mirage_run import load_module

    prepared = prepare(load_module(EXAMPLES / "mugraphs" / "mha_bs8.json"), "graph_0", "sm_90")
    first = prepared.program.source.split("grid (", 1)[1].split(")", 1)[0]
    assert first == "256, 16, 1"


def test_lone_block_variants() -> None:
    """Unsplit looped matmul plans with at most one block per SM also come with 512 threads
    (costed with 4-stage rings: gated_mlp's cheapest unsplit plan is one; its cheapest plan
    is a split-K grid sum whose W tiles are 64 columns wide), never for plans that run
    elementwise work in the loop (rms_norm's sum of squares) nor for attention."""
    planner = Planner(DeviceModel())
    gated = planner.candidates(_group_of("gated_mlp"))
    wide = [fp.kernels[0] for fp in gated if fp.kernels[0].threads == 512]
    unsplit = [fp.kernels[0] for fp in gated if fp.kernels[0].split == 1]
    assert wide and unsplit[0].threads == 512
    assert all(k.split == 1 and k.blocks <= 132 and k.forloop_range > 1 for k in wide)
    narrow_twin = [
        fp.kernels[0] for fp in gated
        if fp.kernels[0].threads == 128 and fp.kernels[0].grid == wide[0].grid
        and fp.kernels[0].forloop_range == wide[0].forloop_range
    ]
    assert narrow_twin and narrow_twin[0].cost_us > wide[0].cost_us  # more warps hide more latency
    for name in ("rmsnorm_linear", "gqa"):
        assert all(k.threads == 128 for fp in planner.candidates(_group_of(name)) for k in fp.kernels)


def _lone_block_kernel(max_stages: int) -> tuple[float, int]:
    """gated_mlp through mirage-transpile (no CuTe) with `lone-block-max-stages`: the chosen
    plan's estimate and the ring tb-plan-pipeline built for it.  W1 and W2 lose their
    `kn.weight` mark, so that the in-flight model, not the weight rule, picks the depth."""
    module = example("gated_mlp")
    fn = the_func(module)
    fn.arg_attrs = ArrayAttr([DictionaryAttr({k: v for k, v in d.data.items() if k != kn.WEIGHT_ATTR}) for d in fn.arg_attrs])
    MirageTranspilePass(to_cute=False, tuning=f"lone_block_max_stages={max_stages}").apply(_context(), module)
    (graph,) = [op for op in module.walk() if isinstance(op, kn.CustomizedOp)]
    assert graph.block[0] == 512 and graph.grid[0] * graph.grid[1] * graph.grid[2] <= 132  # a wide lone block
    stages = {op.attributes["tb.stages"].value.data for op in graph.body.walk() if "tb.stages" in op.attributes}
    assert len(stages) == 1
    return graph.attributes["kn.cost_estimate_us"].value.data, stages.pop()


def test_lone_block_estimate_counts_the_ring_tb_plan_pipeline_builds() -> None:
    """`lone-block-max-stages` reaches kn-fuse's estimate and tb-plan-pipeline alike, and the
    estimate counts the ring actually built: gated_mlp's cheapest plan (34 KiB per stage) gets
    3 stages under the default cap of 4, so caps 4 and 3 estimate the same time; cap 2 builds
    and estimates a double buffer, slower."""
    cost4, stages4 = _lone_block_kernel(4)
    cost3, stages3 = _lone_block_kernel(3)
    cost2, stages2 = _lone_block_kernel(2)
    assert (stages4, stages3, stages2) == (3, 3, 2)
    assert cost4 == cost3 < cost2
    assert KnPartitionPass(lone_block_max_stages=2).device().lone_block_stages == 2


def test_smem_verification_uses_the_real_planner() -> None:
    """Plans estimated above 40% of the limit are checked with tb-plan-smem itself (which may
    drop double buffering to fit); a limit below what it can reach rejects the plan."""
    from mirage_xdsl.passes.conversion.kn_partition import smem_fits

    module = example("rmsnorm_linear")
    for p in (KnExpandCompositesPass(), KnSimplifyPass(), KnRecognizeCompositesPass()):
        p.apply(_context(), module)
    ops = [op for op in the_func(module).body.block.ops if fusible_op(op)]
    group, _ = group_from_ops(ops)
    plan = Planner(DeviceModel(grid_sum=False, always_try_split=False)).plan(group)
    assert plan is not None and 15000 < plan.kernels[0].smem < 25000
    assert smem_fits(plan, SMEM_LIMIT)  # far below the limit: accepted without planning
    assert smem_fits(plan, 15000)  # planned
    assert smem_fits(plan, 10000)  # planned, W single-buffered, the sum of squares in registers
    assert not smem_fits(plan, 9000)  # planned: does not fit
