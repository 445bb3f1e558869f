"""Tests of the layout passes (1-6 of passes/README.md).

* `layout_math`: the examples of mirage-notes 3.3 and the stride/size invariants;
* `tb-resolve-layout`: Z3's optimum equals the brute-force optimum on random small models
  and on models built from real muGraphs; unsat models are reported as such;
* `kn-plan-workspace`: the greedy plan never overlaps live buffers and reuses memory;
* decompositions and the whole 6-pass pipeline keep the numbers (numpy reference executor);
* every candidate of every shared muGraph file goes through the 6 passes quickly.
"""

from __future__ import annotations

import itertools
import math
import random
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from conftest import MUGRAPH_FILES
from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.func import FuncOp
from xdsl.parser import Parser

from mirage_xdsl.dialects import tb
from mirage_xdsl.driver.compile import make_context
from mirage_xdsl.passes import get_all_passes
from mirage_xdsl.passes.kn.plan_workspace import Buffer, overlaps, plan
from mirage_xdsl.passes.tb import layout_problem as lp
from mirage_xdsl.passes.tb import resolve_layout as rl
from mirage_xdsl.passes.tb.fusion_chains import chain_members, compute_chains
from mirage_xdsl.passes.tb.layout_math import calc_tensor_strides, innermost_of_strides, physical_num_elems

LAYOUT_PIPELINE = (
    "kn-decompose-rms-norm",
    "tb-decompose-accumulators",
    "tb-fusion-chains",
    "tb-resolve-layout",
    "tb-compute-strides",
    "kn-plan-workspace",
)
FILECHECK_PASSES = Path(__file__).parents[1] / "filecheck" / "passes"

RMSNORM_GRAPH_0 = (Path(__file__).resolve().parents[1] / "data" / "rmsnorm_bs1_graph0.mlir").read_text()


def parse(text: str) -> ModuleOp:
    return Parser(make_context(), text).parse_module()


def run_passes(module: ModuleOp, names: Sequence[str]) -> None:
    available = get_all_passes()
    for name in names:
        available[name]()().apply(make_context(), module)
    module.verify()


def only_func(module: ModuleOp) -> FuncOp:
    funcs = [op for op in module.walk() if isinstance(op, FuncOp)]
    assert len(funcs) == 1
    return funcs[0]


# ---------------------------------------------------------------------------------------
# layout_math


@pytest.mark.parametrize(
    ("shape", "innermost", "elem_bytes", "strides", "num_phy"),
    [
        ((2, 24), 1, 2, (24, 1), 48),  # mirage-notes 3.3
        ((2, 1), 1, 2, (1, 1), 8),  # dim 0 is the first non-1 dim: padded to 8
        ((15, 15), 1, 2, (16, 1), 240),
        ((2, 4096), 0, 2, (1, 8), 32768),
        ((2, 128), 1, 2, (128, 1), 256),
        ((2, 12), 1, 4, (12, 1), 24),  # fp32 accumulator: 16 B = 4 elements
        ((2, 12), 1, 2, (16, 1), 32),
        ((1, 1), 0, 2, (1, 1), 8),  # a single element still takes one 16-byte chunk
        ((4, 8, 3), 1, 2, (24, 1, 8), 96),  # order [1, 2, 0]
        ((1, 16, 64), 2, 2, (1024, 64, 1), 1024),
    ],
)
def test_calc_tensor_strides(
    shape: tuple[int, ...], innermost: int, elem_bytes: int, strides: tuple[int, ...], num_phy: int
) -> None:
    assert calc_tensor_strides(shape, innermost, elem_bytes) == (strides, num_phy)


def test_physical_num_elems_matches_calc_tensor_strides() -> None:
    rng = random.Random(7)
    for _ in range(500):
        shape = tuple(rng.choice((1, 2, 3, 5, 8, 15, 24, 64)) for _ in range(rng.randint(1, 4)))
        inner = rng.randrange(len(shape))
        nbytes = rng.choice((1, 2, 4, 8))
        strides, num_phy = calc_tensor_strides(shape, inner, nbytes)
        assert physical_num_elems(shape, strides, nbytes) == num_phy
        if math.prod(shape) > 4096:
            continue
        # every element lies inside the buffer and distinct coordinates never alias
        addresses = {sum(i * s for i, s in zip(idx, strides)) for idx in itertools.product(*map(range, shape))}
        assert len(addresses) == math.prod(shape)
        assert max(addresses) < num_phy


def test_innermost_of_strides() -> None:
    assert innermost_of_strides((2, 4096), (4096, 1)) == 1
    assert innermost_of_strides((4, 32, 64), (2048, 1, 32)) == 1
    assert innermost_of_strides((2, 1), (1, 1)) == 1  # the LAST unit stride (Mirage)
    assert innermost_of_strides((4, 4), (8, 2)) == 1  # no unit stride: the smallest


# ---------------------------------------------------------------------------------------
# tb-resolve-layout: Z3 versus brute force


def random_graph(rng: random.Random) -> lp.LayoutGraph:
    """A small random layout graph whose search space can be enumerated."""
    sizes = (1, 2, 3, 8, 24)
    rank = rng.choice((1, 2, 2, 3))
    tensors = []
    for _ in range(rng.randint(2, 5)):
        on_chip = rng.random() < 0.6
        shape = tuple(rng.choice(sizes) for _ in range(rank))
        tensors.append(lp.TensorDesc(shape, on_chip, rng.choice((2, 4))))
    dts = [i for i, t in enumerate(tensors) if not t.on_chip]
    sts = [i for i, t in enumerate(tensors) if t.on_chip]
    ops: list[lp.OpDesc] = []
    for _ in range(rng.randint(1, 6)):
        kind = rng.choice(("fix", "kn_matmul", "kn_same", "kn_reduction", "tb_input", "tb_output", "tb_matmul", "tb_iter"))
        if kind == "fix" and dts:
            ops.append(lp.OpDesc("fix", (rng.choice(dts),), rng.randrange(rank)))
        elif kind in ("kn_matmul", "kn_same") and len(dts) >= 2:
            ops.append(lp.OpDesc(kind, tuple(rng.sample(dts, rng.randint(2, min(3, len(dts)))))))
        elif kind == "kn_reduction" and dts:
            ops.append(lp.OpDesc(kind, (rng.choice(dts),), rng.randrange(rank)))
        elif kind == "tb_input" and dts and sts:
            ops.append(lp.OpDesc(kind, (rng.choice(dts), rng.choice(sts))))
        elif kind == "tb_output" and dts and sts:
            ops.append(lp.OpDesc(kind, (rng.choice(sts), rng.choice(dts))))
        elif kind == "tb_matmul" and sts:
            ops.append(lp.OpDesc(kind, tuple(rng.choice(sts) for _ in range(3))))
        elif kind == "tb_iter" and sts:
            dim = rng.choice((-1, rng.randrange(rank)))
            ops.append(lp.OpDesc(kind, tuple(rng.sample(sts, rng.randint(1, min(3, len(sts))))), dim))
    return lp.LayoutGraph(tuple(tensors), tuple(ops))


def search_space(prob: lp.LayoutProblem) -> int:
    return math.prod(len(c.domain) for c in prob.choices)


def small_random_problems(count: int, limit: int) -> list[lp.LayoutProblem]:
    rng = random.Random(2024)
    problems: list[lp.LayoutProblem] = []
    while len(problems) < count:
        prob = lp.build_problem(random_graph(rng))
        if 100 <= search_space(prob) <= limit:
            problems.append(prob)
    return problems


@pytest.mark.parametrize("prob", small_random_problems(60, 5000))
def test_z3_optimum_equals_exhaustive_enumeration(prob: lp.LayoutProblem) -> None:
    exhaustive = lp.brute_force(prob, prune=False)
    pruned = lp.brute_force(prob, prune=True)
    assert (pruned is None) == (exhaustive is None)
    if exhaustive is None:
        with pytest.raises(lp.LayoutUnsat) as err:
            lp.solve_z3(prob)
        assert err.value.origins, "an unsat core names the rules in conflict"
        return
    assert pruned is not None and pruned[1] == exhaustive[1]
    sol = lp.solve_z3(prob, timeout_ms=20000)
    assert sol.status == "optimal"
    assert sol.cost == exhaustive[1]
    assert lp.evaluate(prob, sol.values) == sol.cost


def test_random_problems_cover_unsat_and_sat() -> None:
    outcomes = {lp.brute_force(p) is None for p in small_random_problems(60, 5000)}
    assert outcomes == {True, False}


def test_z3_is_deterministic() -> None:
    prob = lp.build_problem(random_graph(random.Random(11)))
    while lp.brute_force(prob) is None or search_space(prob) > 3000:
        prob = lp.build_problem(random_graph(random.Random(search_space(prob))))
    first = lp.solve_z3(prob)
    assert all(lp.solve_z3(prob) == first for _ in range(3))


def ir_problem(module: ModuleOp) -> lp.LayoutProblem:
    run_passes(module, ("tb-decompose-accumulators", "tb-fusion-chains"))
    func = next(op for op in module.walk() if isinstance(op, FuncOp))
    builder, _ = rl.build_graph(func)
    return lp.build_problem(builder.graph())


def test_rmsnorm_graph_0_optimum_by_brute_force() -> None:
    """The objective of mirage-notes 2.3's graph, proven optimal by exhaustive search
    (branch and bound over 1.5e6 assignments)."""
    prob = ir_problem(parse(RMSNORM_GRAPH_0))
    assert search_space(prob) == 1492992
    best = lp.brute_force(prob)
    assert best is not None and best[1] == 11984
    sol = lp.solve_z3(prob)
    assert (sol.cost, sol.status) == (11984, "optimal")


@pytest.mark.parametrize("name", ["rmsnorm_bs1", "rmsnorm_bs8", "gated_mlp", "lora"])
def test_first_candidate_optimum_by_brute_force(mugraph_dir: Path, name: str) -> None:
    from mirage_xdsl.frontends.mugraph_import import load_mugraph_file

    module = load_mugraph_file(mugraph_dir / f"{name}.json")
    first = next(op for op in module.walk() if isinstance(op, FuncOp))
    first.detach()
    prob = ir_problem(ModuleOp([first]))
    best = lp.brute_force(prob)
    sol = lp.solve_z3(prob)
    assert best is not None and sol.status == "optimal" and sol.cost == best[1]


def test_unsat_is_a_located_diagnostic() -> None:
    from xdsl.utils.exceptions import DiagnosticException

    module = parse(
        """
        func.func @conflict(%a: tensor<8x16xf16> {kn.strides = array<i64: 16, 1>}, %b: tensor<8x16xf16> {kn.strides = array<i64: 1, 8>}) -> tensor<8x16xf16> {
          %c = kn.add %a, %b : tensor<8x16xf16>, tensor<8x16xf16> -> tensor<8x16xf16>
          func.return %c : tensor<8x16xf16>
        }
        """
    )
    with pytest.raises(DiagnosticException, match="tb-resolve-layout: no layout satisfies"):
        run_passes(module, ("tb-resolve-layout",))


def test_layout_results_follow_the_contract() -> None:
    module = parse(RMSNORM_GRAPH_0)
    run_passes(module, ("tb-decompose-accumulators", "tb-fusion-chains", "tb-resolve-layout"))
    func = only_func(module)
    assert func.attributes["mirage.layout_cost"].value.data == 11984  # type: ignore[attr-defined]
    block = next(op for op in func.walk() if isinstance(op, tb.InputOp)).parent_block()
    assert block is not None
    chains = compute_chains(block)
    for ops in chain_members(chains).values():
        tail = ops[-1]
        for op in ops:  # chain intermediates take the tail's layout
            if op.results:
                assert op.attributes["tb.innermost"] == tail.attributes["tb.innermost"]
        leader = ops[0]
        has_iter = "tb.iter_dim" in leader.attributes
        assert has_iter == (not isinstance(leader, (tb.InputOp, tb.OutputOp, tb.MatmulOp)))


# ---------------------------------------------------------------------------------------
# kn-plan-workspace


def test_workspace_plan_is_valid_and_reuses() -> None:
    rng = random.Random(3)
    for _ in range(300):
        buffers = []
        for _ in range(rng.randint(1, 12)):
            start = rng.randrange(10)
            buffers.append(Buffer(rng.randint(1, 5000), start, start + rng.randrange(4)))
        offsets, total = plan(buffers)
        assert all(off % 128 == 0 for off in offsets)
        for i, j in itertools.combinations(range(len(buffers)), 2):
            if overlaps(buffers[i], buffers[j]):
                end_i = offsets[i] + -(-buffers[i].size // 128) * 128
                end_j = offsets[j] + -(-buffers[j].size // 128) * 128
                assert end_i <= offsets[j] or end_j <= offsets[i], (buffers, offsets)
        assert total == max(off + -(-b.size // 128) * 128 for off, b in zip(offsets, buffers))
        assert total <= sum(-(-b.size // 128) * 128 for b in buffers)  # never worse than a bump allocator
    # a chain of short-lived buffers reuses two slots
    chain = [Buffer(1000, i, i + 1) for i in range(6)]
    offsets, total = plan(chain)
    assert total == 2 * 1024 and len(set(offsets)) == 2


# ---------------------------------------------------------------------------------------
# Semantics: decompositions and the whole pipeline keep the numbers


def leftover_ops(module: ModuleOp) -> list[str]:
    """Ops the decompositions must have removed."""
    return [
        op.name
        for op in module.walk()
        if op.name in ("kn.rms_norm", "tb.rms_norm")
        or isinstance(op, tb.ForloopAccumOp) and op.accum_kind not in ("nored", "nored_rescale", "max")
    ]


def reference() -> object:
    mod = pytest.importorskip("mirage_xdsl.reference.executor")
    run = getattr(mod, "run_reference", None)
    if run is None:
        pytest.skip("mirage_xdsl.run_reference is not available")
    return run


def lit_chunks(name: str) -> list[str]:
    text = (FILECHECK_PASSES / name).read_text()
    return [chunk for chunk in text.split("// -----") if "func.func" in chunk]


SEMANTIC_CASES = [
    ("kn-decompose-rms-norm.mlir", i) for i in range(len(lit_chunks("kn-decompose-rms-norm.mlir")))
] + [("tb-decompose-accumulators.mlir", i) for i in range(len(lit_chunks("tb-decompose-accumulators.mlir")))]


@pytest.mark.parametrize(("file", "index"), SEMANTIC_CASES)
def test_decomposition_preserves_semantics(file: str, index: int) -> None:
    run_reference = reference()
    module = parse(lit_chunks(file)[index])
    args = only_func(module).body.block.args
    rng = np.random.default_rng(index)
    inputs = [rng.standard_normal(arg.type.get_shape()) for arg in args]  # type: ignore[attr-defined]
    before = run_reference(module, inputs)  # type: ignore[operator]
    transformed = module.clone()
    run_passes(transformed, LAYOUT_PIPELINE)  # decompositions + annotations
    assert not leftover_ops(transformed)
    after = run_reference(transformed, inputs)  # type: ignore[operator]
    for b, a in zip(before, after, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def test_rms_norm_decomposition_keeps_fp16_range() -> None:
    """Scaling before the sum keeps every intermediate of kn.rms_norm below max(x^2)."""
    run_reference = reference()
    module = parse(lit_chunks("kn-decompose-rms-norm.mlir")[0])
    run_passes(module, ("kn-decompose-rms-norm",))
    x = np.full((16, 4096), 200.0)  # x^2 = 40000 fits fp16, sum(x^2) = 1.6e8 does not
    (out,) = run_reference(module, [x])  # type: ignore[operator]
    np.testing.assert_allclose(out, np.ones_like(x))
    reduction = next(op for op in module.walk() if op.name == "kn.reduction")
    assert reduction.operands[0].owner.name == "kn.mul_scalar"  # type: ignore[union-attr]


# ---------------------------------------------------------------------------------------
# Every candidate of every shared file


@pytest.mark.parametrize("path", MUGRAPH_FILES, ids=lambda p: p.stem)
def test_layout_pipeline_on_every_candidate(path: Path) -> None:
    from mirage_xdsl.frontends.mugraph_import import load_mugraph_file

    module = load_mugraph_file(path)
    funcs = [op for op in module.walk() if isinstance(op, FuncOp)]
    assert funcs
    for func in funcs:
        func.detach()
        single = ModuleOp([func])
        start = time.perf_counter()
        run_passes(single, LAYOUT_PIPELINE)
        elapsed = time.perf_counter() - start
        assert elapsed < 3.0, f"{path.stem}/{func.sym_name.data}: {elapsed:.2f} s"
        assert func.attributes["mirage.layout_status"].data == "optimal"  # type: ignore[attr-defined]
        assert not leftover_ops(single)
        assert "kn.workspace_size" in func.attributes


def test_unsat_core_names_the_conflicting_rules() -> None:
    graph = lp.LayoutGraph(
        (lp.TensorDesc((8, 16)), lp.TensorDesc((8, 16)), lp.TensorDesc((8, 16)), lp.TensorDesc((4, 4), True)),
        (
            lp.OpDesc("fix", (0,), 1),
            lp.OpDesc("fix", (1,), 0),
            lp.OpDesc("kn_same", (0, 1, 2)),
            lp.OpDesc("tb_iter", (3,)),  # satisfiable on its own: not in the core
        ),
    )
    prob = lp.build_problem(graph)
    assert lp.brute_force(prob, prune=False) is None
    with pytest.raises(lp.LayoutUnsat) as err:
        lp.solve_z3(prob)
    assert sorted(set(err.value.origins)) == [0, 1, 2]


def test_the_layout_search_is_bounded_by_resource_units_not_time() -> None:
    """The solve's budget is Z3's deterministic resource count (a wall-clock limit near the
    solve time changed which of two equally cheap layouts came out): the same problem gives
    the same layout at any load, and a budget too small to find one ends in LayoutTimeout
    or the best layout so far, never a wrong one."""
    sat = [p for p in small_random_problems(60, 5000) if lp.brute_force(p) is not None]
    prob = max(sat, key=lambda p: len(p.choices))
    first = lp.solve_z3(prob)
    assert [lp.solve_z3(prob).values for _ in range(3)] == [first.values] * 3
    try:
        starved = lp.solve_z3(prob, rlimit=1)
    except lp.LayoutTimeout:
        return
    assert starved.status == "timeout" and lp.evaluate(prob, starved.values) == starved.cost
