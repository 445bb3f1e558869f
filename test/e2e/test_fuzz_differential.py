"""Differential fuzzing on the CPU (issue #29 item 2): random kernel and threadblock graphs
from `bench/fuzz.py`, each through `mirage-transpile` + `emit_cuda`, run by the host
emulator on fresh random inputs and compared with the float64 reference executor.

A fixed number of derandomized hypothesis examples (the same graphs on every run);
`python -m mirage_xdsl.bench.fuzz --count N --seed S` runs thousands of them on a GPU (or
with `--emulate` on the CPU).  The regression tests below pin the failure classes that the
fuzzer found, each as the smallest graph showing it.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from conftest import run_tool
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from mirage_xdsl.bench.fuzz_check import check_emulated, compare, reason_of
from mirage_xdsl.bench.fuzz_graphs import FuzzCase, graphs, random_graph
from mirage_xdsl.runtime.host_emulator import find_cxx

needs_cxx = pytest.mark.skipif(find_cxx() is None, reason="no host C++ compiler")

EXAMPLES = 120
"""graphs per CI run: 90 s on an idle 2-core machine (0.7 s a graph), under 3 minutes busy"""


@needs_cxx
@settings(
    derandomize=True,
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)
@given(case=graphs(), seed=st.integers(0, 2**31 - 1))
def test_random_graphs_match_reference(case: FuzzCase, seed: int, tmp_path_factory: pytest.TempPathFactory) -> None:
    out = check_emulated(case, seed, cache_dir=tmp_path_factory.getbasetemp() / "fuzz-host")
    event(f"{case.kind} {case.dtype}: {out.status}")
    if out.status == "rejected":
        event(f"rejected: {out.reason}")
    assert out.status in ("ok", "rejected"), f"{out.status}: {out.reason}\n{out.message}\n{case.module}"


def test_generator_is_deterministic_and_valid() -> None:
    """The same random state gives the same graph; every draw builds (no GraphBuildError
    escapes) and both kinds and all three dtypes come up."""
    a = random_graph(random.Random("3:14"), name="g")
    b = random_graph(random.Random("3:14"), name="g")
    assert str(a.module) == str(b.module)
    seen = set()
    for i in range(120):
        case = random_graph(random.Random(i), name=f"g{i}")
        seen.add((case.kind, case.dtype))
    assert {k for k, _ in seen} == {"kernel", "block"}
    assert {d for _, d in seen} == {"float16", "float32", "bfloat16"}


def test_later_seeds_guard_sums_of_a_value_and_its_own_sum() -> None:
    """From `OPERAND_GUARD_SEED` on, no add / sub pairs a value with a binary op's result it is
    an operand of (`x - (x + m)` cancels below the judge's rounding noise: seed 1184 graph 94);
    earlier seeds keep their draws."""
    from mirage_xdsl.bench import fuzz_graphs as fg

    assert not fg.Draws.of_seed(fg.OPERAND_GUARD_SEED - 1).operand_guard
    assert fg.Draws.of_seed(fg.OPERAND_GUARD_SEED).operand_guard

    class Graph:  # records the ops drawn; tensors are their names
        def __getattr__(self, op: str):  # type: ignore[no-untyped-def]
            return lambda *args, **kw: op

    x, m = fg._Val("x", 1.0), fg._Val("m", 1.0)
    unguarded = set()
    for k in range(200):
        s = fg._binary(random.Random(k), Graph(), x, m)
        assert s.operands == (x, m)
        assert fg._binary(random.Random(k), Graph(), x, s, operand_guard=True).t not in ("add", "sub")
        assert fg._binary(random.Random(k), Graph(), s, x, operand_guard=True).t not in ("add", "sub")
        unguarded.add(fg._binary(random.Random(k), Graph(), x, s).t)
    assert {"add", "sub"} <= unguarded  # what the guard removes


def test_tc_accumulation_keeps_only_the_sums_bound() -> None:
    """From `TC_ACCUMULATE_SEED` on, a value that `+=` grew is drawn with the sum's bound only;
    earlier seeds draw what they drew."""
    from mirage_xdsl.bench import fuzz_graphs as fg
    from mirage_xdsl.bench.fuzz_tc import random_tc_program

    assert fg.Draws.of_seed(fg.TC_ACCUMULATE_SEED, "tc").tc_accumulate
    assert not fg.Draws.of_seed(fg.TC_ACCUMULATE_SEED - 1, "tc").tc_accumulate
    old, new = fg.Draws(tc_constants=True), fg.Draws(tc_constants=True, tc_accumulate=True)
    changed = [i for i in range(100) if random_tc_program(random.Random(f"tc:10:{i}"), "t", old) != random_tc_program(random.Random(f"tc:10:{i}"), "t", new)]
    assert changed and all(") += " in random_tc_program(random.Random(f"tc:10:{i}"), "t", old)[0] for i in changed)


def test_compare_flags_nan_and_error() -> None:
    ref = np.ones((2, 3))
    assert compare([ref.copy()], [ref], "float16")[0]
    bad = ref.copy()
    bad[1, 2] = np.nan
    ok, err, msg = compare([bad], [ref], "float16")
    assert not ok and err == np.inf and "non-finite" in msg
    ok, err, _ = compare([ref * 1.02], [ref], "float16")
    assert not ok and 0.019 < err < 0.021
    assert compare([ref * 1.00001], [ref], "float16")[0] and not compare([ref * 1.001], [ref], "float32")[0]
    # where the reference itself is not finite, the output is not judged there
    ref_nan = ref.copy()
    ref_nan[0, 0] = np.inf
    assert compare([bad * 0 + 1], [ref_nan], "float32")[0] is False  # NaN at [1, 2] where ref is finite
    assert compare([ref], [ref_nan], "float32")[0]


def test_reason_classes_ignore_numbers_and_names() -> None:
    a = reason_of(ValueError("tile %12 of 64x128 at 'foo'"))
    b = reason_of(ValueError("tile %3 of 16x32 at 'bar'"))
    assert a == b == "ValueError: tile %_ of NxN at '_'"


@needs_cxx
def test_fuzz_command_emulated(tmp_path: object) -> None:
    """The command line end to end on the CPU: a one-line summary, exit 0, a JSON report."""
    import json
    from pathlib import Path

    report = Path(str(tmp_path)) / "report.json"
    proc = run_tool(
        "mirage_xdsl.bench.fuzz", "--emulate", "--count", "3", "--seed", "11", "--batch", "2", "--jobs", "1",
        "--failures", str(Path(str(tmp_path)) / "failures"), "--report", str(report), timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = [line for line in proc.stdout.splitlines() if line.startswith("fuzz: 3 graphs")]
    assert summary and "0 mismatches" in summary[0], proc.stdout
    data = json.loads(report.read_text())
    assert data["seed"] == 11 and len(data["graphs"]) == 3


def test_fuzz_time_budget_stops_with_the_graphs_run(tmp_path: object) -> None:
    """`--max-seconds`: once the budget is spent no further batch is collected; the graphs not
    run have no outcome (not crashes) and the summary says how many of the count ran."""
    from mirage_xdsl.bench.fuzz import run_fuzz

    lines: list[str] = []
    outcomes = run_fuzz(12, 7, batch=4, jobs=1, emulate=True, failures_dir=str(tmp_path), log=lines.append, time_budget_s=0.0)
    assert outcomes == []
    assert lines[-2].startswith("fuzz: 0 of 12 graphs, 0 compiled") and "0 crashes" in lines[-2]
    assert lines[-1] == "fuzz: time budget of 0 s spent: 12 graphs not run"


@needs_cxx
def test_two_matmuls_of_one_translation_unit_emulate_apart(tmp_path: object) -> None:
    """tc seed 14 graphs 409 and 410 (a 1-row and a 2-row matmul with K = 3) printed into one
    translation unit: g++ 12 -O2 folded their `ld_pair` tails and the 2-row matmul read row
    0's last k element for row 1 in the emulator (runtime/host_emulator.py: -fno-ipa-icf)."""
    from mirage_xdsl.bench.fuzz import run_fuzz

    outcomes = run_fuzz(0, 14, batch=2, jobs=1, emulate=True, family="tc", only=[409, 410], failures_dir=str(tmp_path), log=lambda line: None)
    assert [(o.name, o.status) for o in outcomes] == [("fuzz_tc_14_409", "ok"), ("fuzz_tc_14_410", "ok")]


def test_fuzz_command_needs_gpu_or_emulate() -> None:
    from conftest import has_gpu

    if has_gpu():
        pytest.skip("a GPU is present")
    proc = run_tool("mirage_xdsl.bench.fuzz", "--count", "1")
    assert proc.returncode == 1 and "--emulate" in proc.stderr


# ---------------------------------------------------------------------------------------
# Regression tests: the failure classes the fuzzer found, each as its smallest graph


def _emulated(module: object, name: str, dtype: str) -> None:
    out = check_emulated(FuzzCase(name, "block", dtype, module), seed=1)
    assert out.status == "ok", f"{out.status}: {out.reason}: {out.message}"


def graph_dead_accumulator(dtype: str = "float16") -> object:
    """A forloop accumulator nothing reads (`dead`) next to used ones: tb-plan-smem gave it a
    lifetime of one level, so it shared storage with the loop's `x * x`, which every
    iteration's max-accumulate then overwrote (relative error ~1e3; fuzz seed 7 graph 43)."""
    from mirage_xdsl.frontends.builder import new_kernel_graph
    from mirage_xdsl.frontends.tb_builder import new_threadblock_graph

    g = new_kernel_graph("dead_acc")
    X = g.new_input(dims=(32, 64), dtype=dtype)
    tb = new_threadblock_graph(grid_dim=(1, 1, 1), forloop_range=2, reduction_dimx=32)
    x = tb.new_input(X, input_map=(0, -1, -1), forloop_dim=1)
    sq = tb.mul(x, x)
    mean = tb.forloop_accum(x, "mean")
    top = tb.forloop_accum_max(sq)
    tb.forloop_accum_max(sq)  # dead
    tb.new_output(tb.sub(mean, top), output_map=(0, 1, -1))
    (out,) = g.customized([X], tb)
    g.mark_output(out)
    return g.module


def graph_unused_invariant_input(dtype: str = "float32") -> object:
    """A loop-invariant input (forloop_dim -1) nothing reads: its load and the clear of the
    accumulator run in the same phase before the loop's first barrier, but tb-plan-smem let
    them share storage (a race: the accumulator started from C's values; seed 7 graph 623)."""
    from mirage_xdsl.frontends.builder import new_kernel_graph
    from mirage_xdsl.frontends.tb_builder import new_threadblock_graph

    g = new_kernel_graph("unused_c")
    X = g.new_input(dims=(8, 128), dtype=dtype)
    C = g.new_input(dims=(8, 64), dtype=dtype)
    tb = new_threadblock_graph(grid_dim=(1, 2, 1), forloop_range=1)
    x = tb.new_input(X, input_map=(0, 1, -1), forloop_dim=1)
    tb.new_input(C, input_map=(0, -1, -1), forloop_dim=-1)  # unused
    tb.new_output(tb.forloop_accum(tb.concat(x, x, 1)), output_map=(0, 1, -1))
    (out,) = g.customized([X, C], tb)
    g.mark_output(out)
    return g.module


def graph_one_row_two_accumulators(dtype: str = "float32") -> object:
    """A computed one-row tile (`exp` of a [1, 128] tile) feeding two accumulators (fuzz seed
    7 graphs 255, 610, seed 8 graph 240): the printer zeroed the accumulators' register tiles
    (`mx::RegTile`) but planned the two accumulates as a register row chain
    (passes/cute/row_chains.py) before it knew which tiles live in registers, so the chain
    read and wrote the never-cleared shared buffers and every output was NaN."""
    from mirage_xdsl.frontends.builder import new_kernel_graph
    from mirage_xdsl.frontends.tb_builder import new_threadblock_graph

    g = new_kernel_graph("row_two_acc")
    X = g.new_input(dims=(1, 384), dtype=dtype)
    tb = new_threadblock_graph(grid_dim=(1, 1, 1), forloop_range=3)
    e = tb.exp(tb.new_input(X, input_map=(0, -1, -1), forloop_dim=1))
    tb.new_output(tb.add(tb.forloop_accum(e), tb.forloop_accum(e)), output_map=(0, 1, -1))
    (out,) = g.customized([X], tb)
    g.mark_output(out)
    return g.module


def graph_dead_register_accumulator(dtype: str = "float16") -> object:
    """A dead accumulator beside two live ones, all three kept in registers by
    cute-register-accumulators: tb-plan-smem let the dead one's buffer end with the loop, so
    its write-back after the loop landed on a live accumulator's tile (NaN and wrong rows;
    fuzz seed 10 graphs 169 and 9604)."""
    from mirage_xdsl.frontends.builder import new_kernel_graph
    from mirage_xdsl.frontends.tb_builder import new_threadblock_graph

    g = new_kernel_graph("dead_reg_acc")
    X = g.new_input(dims=(32, 256), dtype=dtype)
    tb = new_threadblock_graph(grid_dim=(2, 1, 1), forloop_range=2, reduction_dimx=32)
    x = tb.new_input(X, input_map=(0, -1, -1), forloop_dim=1)
    a = tb.forloop_accum(x, "rms")
    b = tb.forloop_accum(x, "rms")
    tb.forloop_accum(x)  # dead
    tb.new_output(tb.sub(a, b), output_map=(0, 1, -1))
    tb.new_output(tb.relu(b), output_map=(0, 1, -1))
    outs = g.customized([X], tb)
    for o in outs:
        g.mark_output(o)
    return g.module


@needs_cxx
@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_dead_register_accumulator_writes_back_apart(dtype: str) -> None:
    _emulated(graph_dead_register_accumulator(dtype), "dead_reg_acc", dtype)


def test_ill_conditioned_rows_are_not_judged() -> None:
    """An rms_norm of the difference of two nearly equal tiles (fuzz seed 10 graphs 4122,
    9946): rounding alone moves a row by more than its size, a kernel's 0 / 0 there is no
    bug; the other rows are still held to the tolerance."""
    from mirage_xdsl.bench.fuzz_check import compare

    ref = np.array([[1.0, -1.0], [1.0, 2.0]])
    rounded = np.array([[0.0, -1.7], [1.0, 2.0]])
    out = np.array([[np.nan, np.nan], [1.0, 2.0]])
    assert compare([out], [ref], "float16", [0.0], [rounded])[0]
    assert not compare([out], [ref], "float16", [0.0], [ref])[0]
    out[1, 1] = 3.0
    assert not compare([out], [ref], "float16", [0.0], [rounded])[0]


@needs_cxx
@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_dead_accumulator_keeps_its_buffer(dtype: str) -> None:
    _emulated(graph_dead_accumulator(dtype), "dead_acc", dtype)


@needs_cxx
@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_unused_invariant_input_does_not_race_the_accumulator_clear(dtype: str) -> None:
    _emulated(graph_unused_invariant_input(dtype), "unused_c", dtype)


@needs_cxx
@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_one_row_tile_feeding_two_accumulators(dtype: str) -> None:
    _emulated(graph_one_row_two_accumulators(dtype), "row_two_acc", dtype)


def test_host_entry_table_without_kernels() -> None:
    """A plan of library calls only (kn-fuse left nothing to generate) has no kernel: the
    emulator's entry table was `{, {nullptr, nullptr}}`, which g++ rejects (a fuzzed plain
    graph found it)."""
    from mirage_xdsl.runtime.host_emulator import _thunks

    assert "kEntries[] = {{nullptr, nullptr}};" in _thunks("")


@needs_cxx
def test_cancellation_is_judged_against_rounding_noise() -> None:
    """Fuzz seed 1 graph 223 computes `max + relu(sum) - relu(sum)` in fp16 with the sum near
    64 and the max near 0.7: fp16's spacing at 64 leaves a relative error of 0.05 in any
    kernel that stores the sum, the storage-rounded reference shows the same, so the graph
    is accepted (it was reported as a mismatch before the noise was taken into account)."""
    from mirage_xdsl.bench import fuzz, fuzz_check, fuzz_graphs

    out = fuzz_check.check_emulated(fuzz.case_of(1, 223), seed=fuzz._input_seed(1, 223))
    assert out.status == "ok", out.message
    assert out.error > fuzz_graphs.TOLERANCE["float16"]


def test_compare_allows_rounding_noise_but_not_more() -> None:
    from mirage_xdsl.bench.fuzz_check import compare

    ref = np.array([1.0, 2.0, 4.0])
    out = ref + np.array([0.0, 0.3, 0.0])
    assert not compare([out], [ref], "float16")[0]
    assert compare([out], [ref], "float16", [0.1])[0]
    assert not compare([out], [ref], "float16", [0.05])[0]


def test_storage_rounding_of_the_reference() -> None:
    from xdsl.dialects.builtin import BFloat16Type, Float16Type, Float32Type, TensorType

    from mirage_xdsl.reference.numpy_ops import round_to_storage

    class _V:
        def __init__(self, elem: object) -> None:
            self.type = TensorType(elem, [3])

    x = np.array([1.0 + 2.0**-8, 1.0 + 3 * 2.0**-9, np.inf])
    assert list(round_to_storage(x, _V(BFloat16Type()))) == [1.0, 1.0 + 2.0**-7, np.inf]  # ties to even
    assert round_to_storage(np.array([1.0 + 2.0**-12]), _V(Float16Type()))[0] == 1.0
    assert round_to_storage(np.array([1.0 + 2.0**-12]), _V(Float32Type()))[0] == 1.0 + 2.0**-12


def test_compare_with_an_all_zero_reference_uses_the_absolute_error() -> None:
    from mirage_xdsl.bench.fuzz_check import compare

    ref = np.zeros(4)
    assert compare([ref + 2e-4], [ref], "float16")[0]
    assert not compare([ref + 0.5], [ref], "float16")[0]


@pytest.mark.gpu
def test_gpu_whole_mma_fragments_read_in_bounds() -> None:
    """Fuzz seed 2 graph 446 (bf16 64x64x64 matmul, then an elementwise pass over the
    matmul's A tile): ptxas (CUDA 13.0) overwrote the register holding the shared base with
    a predicated ldmatrix address (the select between the operand and the zero row) and the
    elementwise pass read through it, past the 24,832-byte plan (illegal address).  Whole
    fragments now load without the select; the graph runs and matches the reference."""
    from pathlib import Path

    path = Path(__file__).parents[1] / "data" / "fuzz_2_446.mlir"
    proc = run_tool("mirage_xdsl.tools.mirage_run", str(path), "--check", "--atol-rel", "0.05")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _saved_case(stem: str, kind: str) -> FuzzCase:
    from pathlib import Path

    from xdsl.parser import Parser

    from mirage_xdsl.driver.compile import make_context

    text = (Path(__file__).parents[1] / "data" / f"{stem}.mlir").read_text()
    return FuzzCase(stem, kind, "float16", Parser(make_context(), text).parse_module())


@needs_cxx
def test_row_chain_of_a_short_shared_row_is_not_formed() -> None:
    """Fuzz seed 12 graph 1566: a chain may start with the reduction of a shared row tile
    (since the softmax work), but only one whose row fills the block (nvcc rejected the
    zero-length register array of a 32-element row in a 128-thread block)."""
    out = check_emulated(_saved_case("fuzz_12_1566", "block"), seed=_seed_of(12, 1566))
    assert out.status == "ok", f"{out.status}: {out.reason}: {out.message}"


@needs_cxx
def test_gelu_keeps_its_negative_tail() -> None:
    """Fuzz seed 13 graph 7664: fp32 gelu of sums near -7 must be about -2e-11, not -0."""
    case = _saved_case("fuzz_13_7664", "block")
    out = check_emulated(FuzzCase(case.name, "block", "float32", case.module), seed=_seed_of(13, 7664))
    assert out.status == "ok", f"{out.status}: {out.reason}: {out.message}"


@needs_cxx
def test_reference_gelu_keeps_its_negative_tail() -> None:
    """Fuzz seed 19 graph 9839: fp32 gelu of means near -7.8 (values ~1e-14).  The float64
    reference computed 1 + erf(x / sqrt2), which cancels there (a 4 % error, exactly 0 at -9),
    and judged the generated code's erfc form wrong by 0.2 %; the reference uses erfc too."""
    case = _saved_case("fuzz_19_9839", "block")
    out = check_emulated(FuzzCase(case.name, "block", "float32", case.module), seed=_seed_of(19, 9839))
    assert out.status == "ok", f"{out.status}: {out.reason}: {out.message}"


@needs_cxx
def test_rms_norm_of_small_products() -> None:
    """Fuzz seed 12 graph 893 (and seed 13 graph 8340): rms_norm of fp16 values near 1e-3.
    Decomposed as mean(x^2) = (x^2 / n) summed, the scaled squares underflowed in fp16
    (relative error 0.1); the sum now comes first and 1/n scales it in fp32."""
    out = check_emulated(_saved_case("fuzz_12_893", "kernel"), seed=_seed_of(12, 893))
    assert out.status == "ok", f"{out.status}: {out.reason}: {out.message}"


def _seed_of(seed: int, index: int) -> int:
    from mirage_xdsl.bench.fuzz import _input_seed

    return _input_seed(seed, index)


@needs_cxx
def test_rms_norm_of_tiny_values() -> None:
    """Fuzz seed 14 graph 337: rms_norm of fp16 values near 1e-6.  Their squares underflowed to
    0 in the fp16 tile of squares (0 / 0 = NaN); cute-fuse-square-sum squares them in fp32
    inside the reduction."""
    out = check_emulated(_saved_case("fuzz_14_337", "kernel"), seed=_seed_of(14, 337))
    assert out.status == "ok", f"{out.status}: {out.reason}: {out.message}"


def test_sums_of_one_signed_values_grow_linearly() -> None:
    """The generator bounds a sum of relu outputs (all >= 0) by the count times their scale,
    not a random walk's sqrt(count): fuzz seed 1127 graph 645 squared the sum of 128 relu
    outputs past fp16's range when it was bounded by sqrt(128)."""
    from mirage_xdsl.bench.fuzz_graphs import _Val, sum_scale

    relu_like = _Val(None, 0.5, one_sign=True)
    mixed = _Val(None, 0.5)
    assert sum_scale(relu_like, 128) == 64.0
    assert sum_scale(mixed, 128) < 10.0


@needs_cxx
@pytest.mark.parametrize("index", [106, 294])
def test_row_chain_keeps_the_barrier_after_its_level(index: int) -> None:
    """Fuzz seed 1127 graphs 106 and 294: after the loop, a row chain began beside a
    reduction of the same level (`reduce_sum` of the rescaled row sums into s11, 4 threads
    per row: no chain member) and took in the next level's `div(acc, s11)`; printed in one
    piece before the barrier between the levels, the division read s11 before the other
    threads had written it (relative error 6e4 in the emulator).  cute-row-chains now ends a
    chain before a barrier when a member behind it touches what an op printed before the
    chain in its level writes (`row_chains._after_barrier_hazard`)."""
    from mirage_xdsl.bench import fuzz, fuzz_check

    out = fuzz_check.check_emulated(fuzz.case_of(1127, index), seed=fuzz._input_seed(1127, index))
    assert out.status == "ok", out.message


@needs_cxx
def test_square_ending_a_register_chain_is_summed_in_fp32() -> None:
    """Fuzz seed 1134 graph 1579: rms_norm over 4-row tiles of 256 columns whose elementwise
    register chain (cute-row-chains) ended with the square and stored it rounded to fp16 for
    the row sum outside the chain (relative error 0.027 for values near 1e-4).
    cute-fuse-square-sum now takes such a square out of its chain and the sum squares the
    chain's stored operand in fp32."""
    from mirage_xdsl.bench import fuzz, fuzz_check

    out = fuzz_check.check_emulated(fuzz.case_of(1134, 1579), seed=fuzz._input_seed(1134, 1579))
    assert out.status == "ok", out.message


@needs_cxx
@pytest.mark.parametrize("scale", [400.0, 1e-3])
def test_rms_norm_of_rows_beyond_fp16_squares(scale: float) -> None:
    """The same chain on rows of magnitude ~400, whose fp16 squares overflowed (the whole row
    came out 0), and ~1e-4, whose squares underflowed: both within fp16 rounding now."""
    from mirage_xdsl.bench.fuzz_check import _emulate, lower_case
    from mirage_xdsl.codegen.cuda_target import emit_cuda
    from mirage_xdsl.frontends.builder import new_kernel_graph
    from mirage_xdsl.runtime.random_inputs import numpy_values

    g = new_kernel_graph("rms_rows")
    x_in = g.new_input((8, 256), dtype="float16", name="X")
    s_in = g.new_input((8, 1), dtype="float16", name="S")
    g.mark_output(g.silu(g.rms_norm(g.silu(g.mul(x_in, s_in)), (256,))))
    case = FuzzCase("rms_rows", "kernel", "float16", g.module)
    program = emit_cuda(lower_case(case, {"flash_attention": False}))
    assert "reduce_sum_squares" in program.source
    x = np.random.default_rng(5).uniform(-1, 1, (8, 256)).astype(np.float16)
    s = np.full((8, 1), scale, np.float16)
    (out,) = _emulate(program, case, [x, s], None)
    got = numpy_values(out, "float16").astype(np.float64)
    h = x.astype(np.float64) * float(s[0, 0])
    h = h / (1 + np.exp(-h))
    n = h / np.sqrt((h**2).mean(axis=1, keepdims=True))
    ref = n / (1 + np.exp(-n))
    assert np.isfinite(got).all()
    assert np.abs(got - ref).max() <= 4e-3 * np.abs(ref).max()


@needs_cxx
@pytest.mark.parametrize("index", [7, 58, 147])
def test_a_shared_rms_norm_read_by_two_matmuls(index: int) -> None:
    """Fuzz seed 1138 (the first that draws forks, `fuzz_graphs.FORK_SEED`): an RMSNorm read by
    two matmuls (graph 7: of a matmul that is also an output; graph 58: of a residual sum;
    graph 147: of a graph input, both projections then forked again), whose statistic
    kn-simplify copies per matmul and kn-partition merges again inside the one kernel that
    holds both; the generated kernels agree with the reference in the emulator.  Graph 147
    was rejected with "kn.sqrt: an intermediate tensor has no 'kn.workspace_offset'" (7 of the
    seed's 1500 graphs): the partition lowered the merged group with a plan cached for a cut
    that read the second copy's statistic as an input; the plan cache is dropped after a merge."""
    from mirage_xdsl.bench import fuzz, fuzz_check
    from mirage_xdsl.dialects import kn

    case = fuzz.case_of(1138, index)
    norms = [op for op in case.module.walk() if isinstance(op, kn.RmsNormOp)]
    assert any(sum(isinstance(u.operation, kn.MatmulOp) for u in n.results[0].uses) == 2 for n in norms)
    out = fuzz_check.check_emulated(case, seed=fuzz._input_seed(1138, index))
    assert out.status == "ok", out.message


@needs_cxx
def test_rms_norm_of_a_returned_square_squares_in_fp32() -> None:
    """Fuzz seed 1139 graph 919: rms_norm(s) with s = (exp(X) @ W)^2 also returned, in fp16.
    The store of s to global memory sat between the elementwise square of s and the sum, so
    cute-fuse-square-sum left the fp16 squares (inf past |s| > 256, the norm 0: relative
    error 1); it now folds them into the sum across such stores."""
    from mirage_xdsl.bench import fuzz, fuzz_check

    out = fuzz_check.check_emulated(fuzz.case_of(1139, 919), seed=fuzz._input_seed(1139, 919))
    assert out.status == "ok", out.message


@needs_cxx
def test_rms_norm_of_tiny_fp16_rows_before_two_matmuls() -> None:
    """Fuzz seed 1144 graph 2064: x = square(s) * X in fp16 with |s| ~ 1e-3, so some rows of x
    have an rms of ~2e-6, then rms_norm(x) read by two matmuls and a row sum.  The kernel stored
    x^2 / 64 in fp16 (0 for those rows: the norm was inf, 11 of 96 outputs) because the first
    MMA, its accumulator's store and a residual's copy of x sat between the squares and their
    sum; cute-fuse-square-sum now folds the square into the sum past ops that leave x's
    shared memory as it is."""
    from mirage_xdsl.bench import fuzz, fuzz_check

    out = fuzz_check.check_emulated(fuzz.case_of(1144, 2064), seed=fuzz._input_seed(1144, 2064))
    assert out.status == "ok", out.message


@needs_cxx
def test_a_row_chain_keeps_its_start_when_a_square_could_fold() -> None:
    """Fuzz seed 1146 graph 578 (a block graph with two rms norms): the square that starts a
    register row chain was folded into its sum past the chain's next member once ops other
    than barriers could sit between them, and the printer refused the chain without its start
    (`cute.row_chain_run`); such a square now folds only when it ends its chain."""
    from mirage_xdsl.bench import fuzz, fuzz_check

    out = fuzz_check.check_emulated(fuzz.case_of(1146, 578), seed=fuzz._input_seed(1146, 578))
    assert out.status == "ok", out.message


@needs_cxx
def test_rms_norm_after_a_grid_sum_squares_in_fp32() -> None:
    """Fuzz seed 1151 graph 833: rms_norm of a split-K matmul's result (values near 632) in
    fp16.  cute-grid-sum-epilogue put the square into its register phase and stored it, rounded
    to fp16 (inf), for the sum after the phase: the whole output was 0 (relative error 1).
    cute-fuse-square-sum now runs first and folds the square into the sum, which squares the
    stored grid sum in fp32."""
    from mirage_xdsl.bench import fuzz, fuzz_check
    from mirage_xdsl.codegen.cuda_target import emit_cuda

    case = fuzz.case_of(1151, 833)
    source = emit_cuda(fuzz_check.lower_case(case, {"flash_attention": False})).source
    assert "grid_partial_sum" in source and source.count("reduce_sum_squares") == 2
    out = fuzz_check.check_emulated(case, seed=fuzz._input_seed(1151, 833))
    assert out.status == "ok", out.message


@needs_cxx
def test_rms_accumulator_of_small_values() -> None:
    """Fuzz seed 19 graph 3278: an fp16 threadblock graph's `red_ld_rms` of x^8 (values up to
    4e-3).  Decomposed as Mirage does (squares scaled by 1/(n R) before the sum), the scaled
    squares and their mean were fp16 subnormals and the statistic 11 % off; the squares are
    now summed in fp32, scaled after the sum and rounded once, by the sqrt."""
    out = check_emulated(_saved_case("fuzz_19_3278", "block"), seed=_seed_of(19, 3278))
    assert out.status == "ok", f"{out.status}: {out.reason}: {out.message}"


@needs_cxx
@pytest.mark.parametrize(("index", "op"), [(6, "kn.reduction_max"), (38, "kn.concat"), (76, "kn.causal_mask")])
def test_row_ops_of_kernel_graphs(index: int, op: str) -> None:
    """Fuzz seed 1162 (the first that draws row ops, `fuzz_graphs.ROW_OPS_SEED`): a row max
    (graph 6, fp32), a concat with another input (graph 38, fp16) and a causally masked stable
    softmax (graph 76, fp16) inside random kernel graphs agree with the reference in the
    emulator (the seed's 400 graphs: 0 mismatches)."""
    from mirage_xdsl.bench import fuzz, fuzz_check

    case = fuzz.case_of(1162, index)
    assert op in str(case.module)
    out = fuzz_check.check_emulated(case, seed=fuzz._input_seed(1162, index))
    assert out.status == "ok", f"{out.status}: {out.reason}: {out.message}"


@needs_cxx
@pytest.mark.parametrize(("index", "op"), [(3, "kn.reshape"), (22, "kn.chunk"), (56, "kn.chunk"), (69, "kn.reshape")])
def test_view_ops_of_kernel_graphs(index: int, op: str) -> None:
    """Fuzz seed 1172 (the first that draws view ops, `fuzz_graphs.VIEW_OPS_SEED`): a reshape
    splitting the last dim (graph 3, fp32), rotary embedding's rotate-half after a gated fork
    (graph 22, fp16), a chunk into gate and up halves (graph 56, fp32) and a reshape feeding a
    matmul (graph 69, fp16) agree with the reference in the emulator."""
    from mirage_xdsl.bench import fuzz, fuzz_check

    case = fuzz.case_of(1172, index)
    assert op in str(case.module)
    out = fuzz_check.check_emulated(case, seed=fuzz._input_seed(1172, index))
    assert out.status == "ok", f"{out.status}: {out.reason}: {out.message}"


@needs_cxx
def test_a_library_call_reads_an_aliased_reshape_of_an_input_with_its_shape() -> None:
    """Fuzz seed 1175 graph 826 (fp16): `kn.chunk` of `reshape(X)` ([2, 32, 64] -> [64, 64],
    a view of X's buffer after kn-alias-reshape) runs as a library call, which was given X
    with X's own shape and split it along the wrong dim (the runtime stored [2, 16, 64] halves
    into [64, 32] slots).  The launch plan now gives a view of an input or output its own spec."""
    from mirage_xdsl.bench import fuzz, fuzz_check
    from mirage_xdsl.codegen.launch_plan import TensorRef, TensorSpec
    from mirage_xdsl.driver.compile import prepare

    case = fuzz.case_of(1175, 826)
    chunk = next(s for s in prepare(case.module.clone(), case.name, "sm_80").plan.steps if getattr(s, "op", "") == "chunk")
    assert chunk.args == (TensorRef("input", 0, 0, TensorSpec((64, 64), (64, 1), "float16")),)
    out = fuzz_check.check_emulated(case, seed=fuzz._input_seed(1175, 826))
    assert out.status == "ok", f"{out.status}: {out.reason}: {out.message}"


@pytest.mark.gpu
def test_gpu_library_call_on_an_aliased_reshape_of_an_input() -> None:
    """The graph above on the GPU (CuPy library calls on a strided view of the input)."""
    from pathlib import Path

    path = Path(__file__).parents[1] / "data" / "fuzz_1175_826.mlir"
    proc = run_tool("mirage_xdsl.tools.mirage_run", str(path), "--check")
    assert proc.returncode == 0, proc.stdout + proc.stderr


@needs_cxx
def test_a_component_that_a_concat_leaves_and_reenters_is_not_one_kernel() -> None:
    """Fuzz seed 1165 graph 131 (fp32): `c = concat(X @ W, Y)`, then `a = c + X @ W` and
    `a - c`.  The fusible ops {matmul, add, sub} are one component, but a path leaves it
    through the concat (not fusible) and re-enters it, so as one kernel it would both feed and
    read the concat: kn-partition raised "the kernel graph has a cycle after partitioning".
    Such a component is now built op by op, with convexity checked at each step."""
    from mirage_xdsl.bench import fuzz, fuzz_check

    case = fuzz.case_of(1165, 131)
    assert "kn.concat" in str(case.module)
    out = fuzz_check.check_emulated(case, seed=fuzz._input_seed(1165, 131))
    assert out.status == "ok", f"{out.status}: {out.reason}: {out.message}"


@needs_cxx
def test_a_one_warp_row_chain_reduces_inside_its_shared_memory() -> None:
    """Fuzz seed 1185 graph 2300: a softmax row chain in a 32-thread block reduced its row max
    and sum through `mx::block_max` / `mx::block_sum`, which keep one float per warp in shared
    memory past the plan, but the launch asked for no such scratch (cute-block-reduce had given
    the reductions 32 threads: no cross-warp scratch); the GPU faulted (illegal address).  The
    emulator now checks shared memory bounds, and the scratch is counted for chain reductions."""
    from mirage_xdsl.bench import fuzz, fuzz_check

    out = fuzz_check.check_emulated(fuzz.case_of(1185, 2300), seed=fuzz._input_seed(1185, 2300))
    assert out.status == "ok", out.message


@needs_cxx
def test_a_square_ending_a_chain_folds_past_the_mmas() -> None:
    """Fuzz seed 1186 graph 941: softmax -> rms_norm read by two matmuls, fp16.  The chain
    ended with `x^2 / 256` (terms near 6e-8, fp16 subnormals) stored rounded for the sum after
    the two MMAs, which cute-fuse-square-sum would not fold past (only barriers and global
    stores could sit between): the norm was 0.8 % off and the product 5 %.  Now only a later
    chain member stops the fold."""
    from mirage_xdsl.bench import fuzz, fuzz_check

    out = fuzz_check.check_emulated(fuzz.case_of(1186, 941), seed=fuzz._input_seed(1186, 941))
    assert out.status == "ok", out.message


@needs_cxx
def test_rms_norm_of_a_forloop_max_accumulator_squares_in_fp32() -> None:
    """Fuzz seed 1192 graph 2510 (a block graph): rms_norm of a forloop max accumulator (kept
    in fp32) of gelu(X / 8)^4, values near 1e-5, in fp16.  The square was stored into an fp16
    tile (0 for every element) because cute-fuse-square-sum left fp32 sources alone; the norm
    was inf and the output all NaN.  The pass now looks at the type the squares are stored in."""
    from mirage_xdsl.bench import fuzz, fuzz_check

    out = fuzz_check.check_emulated(fuzz.case_of(1192, 2510), seed=fuzz._input_seed(1192, 2510))
    assert out.status == "ok", out.message
