"""`reference/equivalence.py` and `mirage-verify`: a graph is accepted when it computes its
program and rejected when one op is changed (a div replaced by a mul, an operand swapped)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_one_line_error

from mirage_xdsl.reference.equivalence import (
    EquivalenceError,
    InputSpec,
    compare,
    graph_runner,
    relative_error,
    specs_of,
)

ROOT = Path(__file__).resolve().parents[2]
GRAPH0 = ROOT / "test" / "data" / "rmsnorm_bs1_graph0.mlir"
PROGRAM = ROOT / "examples" / "rmsnorm_linear.mlir"
VERIFY = [sys.executable, "-m", "mirage_xdsl.tools.mirage_verify"]


def _rms_linear(inputs: list[np.ndarray]) -> list[np.ndarray]:
    x, w = inputs
    return [x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True)) @ w]


def _module(text: str):  # noqa: ANN202 - xDSL ModuleOp
    from xdsl.parser import Parser

    from mirage_xdsl.driver.compile import make_context

    return Parser(make_context(), text).parse_module()


def test_saved_graph_computes_rms_norm_linear() -> None:
    module = _module(GRAPH0.read_text())
    func = next(op for op in module.body.block.ops if op.name == "func.func")
    specs = specs_of(func)
    assert specs == [InputSpec((2, 4096), "float16"), InputSpec((4096, 6144), "float16")]
    report = compare(graph_runner(module), _rms_linear, specs, seeds=(0, 1), scales=(0.5, 4.0))
    assert len(report.trials) == 4
    assert report.equivalent, report.max_error


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("tb.div %t5, %t3", "tb.mul %t5, %t3"),  # the example: 0.66 away from rms_norm(X) @ W
        ("forloop_accum red_ld_rms", "forloop_accum red_ld_mean"),  # mean instead of root mean square
    ],
)
def test_one_changed_op_is_rejected(old: str, new: str) -> None:
    text = GRAPH0.read_text()
    assert old in text
    module = _module(text.replace(old, new))
    func = next(op for op in module.body.block.ops if op.name == "func.func")
    report = compare(graph_runner(module), _rms_linear, specs_of(func), seeds=(0,), scales=(0.5,))
    assert not report.equivalent
    assert report.max_error > 0.1


def test_relative_error_rules() -> None:
    assert relative_error([1.0, 2.0], [1.0, 2.0]) == 0.0
    assert relative_error([1.0, np.inf], [1.0, np.inf]) == 0.0  # the same overflow on both sides
    assert relative_error([1.0, np.nan], [1.0, 2.0]) == float("inf")  # NaN where the program has none
    assert relative_error([0.0, 2.0], [0.0, 4.0]) == pytest.approx(0.5)
    with pytest.raises(EquivalenceError, match=r"shape \(2,\) against \(3,\)"):
        relative_error([1.0, 2.0], [1.0, 2.0, 3.0])


def test_mirage_verify_accepts_and_rejects(tmp_path: Path) -> None:
    ok = subprocess.run([*VERIFY, str(GRAPH0), str(PROGRAM), "--seeds", "1"], capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.startswith("graph_0: equivalent (max rel error")
    wrong = tmp_path / "wrong.mlir"
    wrong.write_text(GRAPH0.read_text().replace("tb.div %t5, %t3", "tb.mul %t5, %t3"))
    bad = subprocess.run([*VERIFY, str(wrong), str(PROGRAM), "--seeds", "1"], capture_output=True, text=True, timeout=300)
    assert bad.returncode == 1, bad.stderr
    assert bad.stdout.startswith("graph_0: DIFFERS: output 0 rel error")


def test_mirage_verify_python_program(tmp_path: Path) -> None:
    prog = tmp_path / "rms.py"
    prog.write_text(
        "import numpy as np\n"
        "def program(x, w):\n"
        "    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True)) @ w\n"
    )
    ok = subprocess.run([*VERIFY, str(GRAPH0), str(prog), "--seeds", "1", "--scales", "2"], capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0, ok.stderr
    assert "equivalent" in ok.stdout


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["missing.mlir", str(PROGRAM)], "missing.mlir: no such file"),
        ([str(GRAPH0), "no_such_workload"], "'no_such_workload'"),
        ([str(GRAPH0), str(PROGRAM), "--scales", "x"], "--scales x: expected positive numbers"),
        ([str(GRAPH0), str(PROGRAM), "--graph", "7"], "--graph 7:"),
    ],
)
def test_mirage_verify_errors(args: list[str], needle: str) -> None:
    proc = subprocess.run([*VERIFY, *args], capture_output=True, text=True, timeout=120)
    assert_one_line_error("mirage-verify", proc, needle)


def test_mirage_verify_shape_mismatch(tmp_path: Path) -> None:
    prog = tmp_path / "t.py"
    prog.write_text("def program(x, w):\n    return (x @ w).T\n")
    proc = subprocess.run([*VERIFY, str(GRAPH0), str(prog), "--seeds", "1"], capture_output=True, text=True, timeout=120)
    assert_one_line_error("mirage-verify", proc, "graph_0: cannot be compared with the program: output 0: shape (2, 6144) against (6144, 2)")


def test_mirage_run_against(tmp_path: Path) -> None:
    """`mirage-run --against`: the right graph passes, the graph with one op changed exits 1
    with a DIFFERS line, though its kernels agree with its own reference."""
    run = [sys.executable, "-m", "mirage_xdsl.tools.mirage_run"]
    ok = subprocess.run([*run, str(GRAPH0), "--against", str(PROGRAM)], capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0, ok.stderr
    assert f"graph_0: computes {PROGRAM}" in ok.stdout
    wrong = tmp_path / "wrong.mlir"
    wrong.write_text(GRAPH0.read_text().replace("tb.div %t5, %t3", "tb.mul %t5, %t3"))
    bad = subprocess.run([*run, str(wrong), "--against", str(PROGRAM)], capture_output=True, text=True, timeout=300)
    assert bad.returncode == 1
    assert "graph_0: DIFFERS: output 0 rel error" in bad.stdout
