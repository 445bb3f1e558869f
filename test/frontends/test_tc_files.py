"""Tensor Comprehensions files (examples/tc/, frontends/tc/files.py): the `# sizes:` line,
loading through driver/load.py, agreement with the TC interpreter and with the workloads'
plain graphs, the pipeline on the CPU, every file on the GPU (fuzzed files:
test_tc_files_fuzz.py, which needs hypothesis, absent on the GPU machines)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pytest

from mirage_xdsl.driver.load import ModuleLoadError, functions, load_module
from mirage_xdsl.frontends.tc import TcError, check_source, interpret, read_sizes_header, tc_file
from mirage_xdsl.reference.executor import run_reference

REPO = Path(__file__).resolve().parents[2]
TC_DIR = REPO / "examples" / "tc"
FILES = sorted(p.name for p in TC_DIR.glob("*.tc"))

SMALL = {
    "bmm.tc": {"B": 2, "M": 3, "K": 4, "N": 5},
    "gated_mlp.tc": {"B": 2, "D": 8, "H": 6},
    "gqa.tc": {"G": 2, "M": 3, "E": 4, "L": 5},
    "gqa_bs8.tc": {"G": 3, "M": 2, "E": 4, "L": 7},
    "layernorm.tc": {"N": 3, "D": 16},
    "lora.tc": {"M": 3, "D": 8, "N": 5, "R": 2},
    "matmul.tc": {"M": 4, "K": 8, "N": 6},
    "mlp.tc": {"B": 2, "D": 8, "H": 16, "E": 4},
    "rmsnorm_linear.tc": {"B": 2, "D": 16, "N": 5},
    "rmsnorm_linear_bs8.tc": {"B": 4, "D": 8, "N": 3},
    "softmax.tc": {"N": 4, "D": 8},
    "softmax_dag.tc": {"N": 3, "D": 17},
}
"""Small sizes per file (overriding its `# sizes:` line) for the float64 comparisons."""

WORKLOAD_GRAPHS = {
    "rmsnorm_linear.tc": "rmsnorm_linear.mlir",
    "rmsnorm_linear_bs8.tc": "rmsnorm_linear_bs8.mlir",
    "gated_mlp.tc": "gated_mlp.mlir",
    "gqa.tc": "gqa.mlir",
    "gqa_bs8.tc": "gqa_bs8.mlir",
    "lora.tc": "lora.mlir",
}
"""The six workloads' programs in TC and their plain kernel graphs under examples/."""


def test_the_examples_are_all_there() -> None:
    assert set(FILES) == set(SMALL)
    assert {"softmax.tc", "softmax_dag.tc", "matmul.tc", "bmm.tc", "layernorm.tc", "mlp.tc"} <= set(FILES)
    assert set(WORKLOAD_GRAPHS) <= set(FILES)


@pytest.mark.parametrize("name", FILES)
def test_file_loads_with_its_sizes_line(name: str) -> None:
    path = TC_DIR / name
    header = read_sizes_header(path.read_text(), str(path))
    assert header.loc is not None and header.sizes, f"{name} has no '# sizes:' line"
    module = load_module(path)  # verified, kernel graphs checked
    (func,) = functions(module)
    assert func.sym_name.data == Path(name).stem
    checked = check_source(path.read_text(), filename=name)
    for param, arg in zip(checked.tree.params, func.body.block.args):
        expected = tuple(s.evaluate(header.sizes) for s in checked.inputs[param.name].shape)
        assert tuple(arg.type.get_shape()) == expected, param.name


@pytest.mark.parametrize("name", FILES)
def test_file_agrees_with_the_interpreter_on_small_sizes(name: str) -> None:
    path = TC_DIR / name
    sizes = SMALL[name]
    module = load_module(path, sizes=sizes)  # the sizes override the file's line
    checked = check_source(path.read_text(), filename=name)
    rng = np.random.default_rng(3)
    shapes = [tuple(s.evaluate(sizes) for s in info.shape) for info in checked.inputs.values()]
    # positive inputs: sqrt and the divisions of the norms stay away from 0
    inputs = [rng.uniform(0.5, 1.5, shape) for shape in shapes]
    expected = interpret(checked, sizes, inputs)
    got = run_reference(module, inputs)
    assert len(got) == len(expected)
    for (out, want), have in zip(expected.items(), got):
        assert have.size == want.size, out
        np.testing.assert_allclose(have.reshape(want.shape), want, rtol=1e-12, atol=1e-12, err_msg=f"{name}: {out}")


@pytest.mark.parametrize("name", sorted(WORKLOAD_GRAPHS))
def test_workload_program_computes_the_plain_graph(name: str) -> None:
    """At the file's own (the workload's) sizes: the TC program's last output is the plain
    graph's output on the same float64 inputs."""
    tc_module = load_module(TC_DIR / name)
    plain = load_module(REPO / "examples" / WORKLOAD_GRAPHS[name])
    (func,) = functions(plain)
    shapes = [tuple(a.type.get_shape()) for a in func.body.block.args]
    assert [tuple(a.type.get_shape()) for a in functions(tc_module)[0].body.block.args] == shapes
    rng = np.random.default_rng(5)
    inputs = [rng.uniform(-0.5, 0.5, s) for s in shapes]
    (want,) = run_reference(plain, inputs)
    have = run_reference(tc_module, inputs)[-1]
    np.testing.assert_allclose(have.reshape(want.shape), want, rtol=1e-10, atol=1e-12 * float(np.abs(want).max()))


@pytest.mark.parametrize("name", FILES)
def test_file_goes_through_the_pipeline(name: str) -> None:
    """The default pipeline and the CUDA printer at the file's sizes, for sm_90a (no nvcc)."""
    from mirage_xdsl.driver.compile import prepare

    prepared = prepare(load_module(TC_DIR / name), None, "sm_90a")
    assert any(s.step == "kernel" for s in prepared.plan.steps)
    assert len(prepared.plan.outputs) == len(check_source((TC_DIR / name).read_text()).outputs)


# ---------------------------------------------------------------------------------------
# The sizes line

SOURCE = """# a comment
# sizes: M=4, K = 8,N=6
def matmul(half(M, K) A, half(K, N) B) -> (C) {
  C(m, n) +=! A(m, k) * B(k, n)
}
"""


def test_sizes_line_is_read_and_overridden() -> None:
    header = read_sizes_header(SOURCE, "m.tc")
    assert header.sizes == {"M": 4, "K": 8, "N": 6}
    assert header.loc is not None and (header.loc.line, header.locs["K"].col, header.locs["N"].col) == (2, 15, 21)
    assert "tensor<4x8xf16>" in str(tc_file(SOURCE, "m.tc"))
    assert "tensor<2x8xf16>" in str(tc_file(SOURCE, "m.tc", sizes={"M": 2}))
    assert read_sizes_header("def f() -> () {}").loc is None


@pytest.mark.parametrize(
    ("source", "sizes", "message"),
    [
        (SOURCE.replace("N=6", "N=six"), None, "m.tc:2:21: error: bad size 'N=six' in the sizes line (expected NAME=INT, e.g. N=64)"),
        (SOURCE.replace("N=6", "M=6"), None, "m.tc:2:21: error: size 'M' given twice in the sizes line"),
        (SOURCE.replace("N=6", "N=0"), None, "m.tc:2:21: error: size 'N' must be a positive int, got 0"),
        (SOURCE + "# sizes: M=1\n", None, "m.tc:6:1: error: a second '# sizes:' line (the first is on line 2); give every size in one line"),
        (SOURCE.replace("N=6", "N=6, Q=2"), None,
         "m.tc:2:26: error: unknown size symbol 'Q' in the '# sizes:' line (the program's sizes: K, M, N)"),
        (SOURCE, {"Q": 2}, "m.tc:3:5: error: unknown size symbol 'Q' in the sizes given (the program's sizes: K, M, N)"),
        (SOURCE.replace(",N=6", ""), None, "m.tc:3:34: error: missing size for 'N' (give it in its '# sizes:' line or with --tc-sizes)"),
        (SOURCE.replace("# sizes: M=4, K = 8,N=6\n", ""), None,
         "m.tc:2:17: error: missing size for 'M' (give it in a '# sizes: M=64,K=64,N=64' line or with --tc-sizes)"),
    ],
)  # fmt: skip
def test_sizes_errors_are_located(source: str, sizes: dict[str, int] | None, message: str) -> None:
    with pytest.raises(TcError) as info:
        tc_file(source, "m.tc", sizes)
    assert str(info.value) == message


def test_several_definitions_share_the_sizes_line() -> None:
    two = SOURCE + "def scale(half(M, K) A) -> (S) {\n  S(m, k) = A(m, k) * 2\n}\n"
    assert [f.sym_name.data for f in functions(tc_file(two, "two.tc"))] == ["matmul", "scale"]
    # one definition of the file: the sizes line may name the other's sizes, explicit sizes may not
    assert [f.sym_name.data for f in functions(tc_file(two, "two.tc", name="scale"))] == ["scale"]
    with pytest.raises(TcError, match="unknown size symbol 'N' in the sizes given"):
        tc_file(two, "two.tc", sizes={"N": 2}, name="scale")


def test_load_module_sizes_only_for_tc(tmp_path: Path) -> None:
    with pytest.raises(ModuleLoadError, match="apply to Tensor Comprehensions files"):
        load_module(REPO / "examples" / "lora.mlir", sizes={"N": 2})
    path = tmp_path / "m.tc"
    path.write_text(SOURCE.replace(",N=6", ""))
    with pytest.raises(TcError, match=rf"^{re.escape(str(path))}:3:34: error: missing size for 'N'"):
        load_module(path)
    assert "tensor<4x6xf16>" in str(load_module(path, sizes={"N": 6}))


def test_tools_read_tc_files(tmp_path: Path) -> None:
    """mirage-run (no GPU needed for a load error) and mirage-tune print a TC file's located
    error as one line; mirage-bench takes --tc-sizes with --tune only."""
    from conftest import assert_one_line_error, run_tool

    path = tmp_path / "m.tc"
    path.write_text(SOURCE.replace(",N=6", ""))
    proc = run_tool("mirage_xdsl.tools.mirage_run", str(path), timeout=120)
    assert_one_line_error("mirage-run", proc, f"{path}:3:34: missing size for 'N'")
    proc = run_tool("mirage_xdsl.tools.mirage_tune", str(path), "--dry-run", timeout=120)
    assert_one_line_error("mirage-tune", proc, f"{path}:3:34: missing size for 'N'")
    proc = run_tool("mirage_xdsl.tools.mirage_tune", str(path), "--dry-run", "--tc-sizes", "N6", timeout=120)
    assert_one_line_error("mirage-tune", proc, "--tc-sizes: bad size 'N6'")
    proc = run_tool("mirage_xdsl.tools.mirage_bench", "out.md", "--files", str(path), "--tc-sizes", "N=6", timeout=120)
    assert_one_line_error("mirage-bench", proc, "--tc-sizes goes with --tune")


def test_bench_files_know_tc_files() -> None:
    from mirage_xdsl.bench.workloads import resolve_files, workload_of_file

    assert workload_of_file(TC_DIR / "lora.tc") == "tc_lora"
    (resolved,) = resolve_files(["gqa_bs8.tc"], [])
    assert resolved.name == "tc_gqa_bs8" and resolved.files == (TC_DIR / "gqa_bs8.tc",)


# ---------------------------------------------------------------------------------------
# On the GPU: every file through mx.compile's default pipeline, at its own sizes


@pytest.mark.gpu
@pytest.mark.parametrize("name", FILES)
def test_file_on_the_gpu(name: str) -> None:
    """NaN-poisoned outputs, fresh random inputs (the seed is in the failure message), the
    float64 reference executor; tolerance and rounding-noise allowance of bench/fuzz_check.py
    `compare` (1e-2 of max |ref| for fp16, 1e-4 for fp32)."""
    import cupy

    import mirage_xdsl as mx
    from mirage_xdsl.bench.fuzz_check import compare
    from mirage_xdsl.runtime.measure import to_device
    from mirage_xdsl.runtime.random_inputs import numpy_values, random_inputs

    module = load_module(TC_DIR / name)
    graph = mx.compile(module, poison_outputs=True)
    seed = int.from_bytes(os.urandom(4), "little")
    host = random_inputs(graph.plan.inputs, seed)
    values = [numpy_values(x, s.dtype) for x, s in zip(host, graph.plan.inputs)]
    outs = graph(*[to_device(cupy, x) for x in host])
    cupy.cuda.get_current_stream().synchronize()
    got = [numpy_values(cupy.asnumpy(o), s.dtype) for o, s in zip(outs, graph.plan.outputs)]
    refs = run_reference(module, values)
    rounded = run_reference(module, values, storage_rounding=True)
    noise = [float(np.abs(r - q)[np.isfinite(r) & np.isfinite(q)].max(initial=0.0)) for r, q in zip(refs, rounded)]
    ok, err, message = compare(got, refs, graph.plan.outputs[0].dtype, noise, rounded)
    assert ok, f"{name} (seed {seed}): {message}"
    assert all(np.isfinite(g).all() for g in got), f"{name} (seed {seed}): a non-finite output"
