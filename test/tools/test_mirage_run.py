"""`mirage-run`: the no-GPU path on a shared muGraph file, error exits, helpers."""

from __future__ import annotations

import functools
import math
import subprocess
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_one_line_error as one_line_error
from conftest import has_gpu, run_tool

from mirage_xdsl.tools import mirage_run
from mirage_xdsl.tools.mirage_run import relative_error, rotation_sets, select

KN_ONLY = """
func.func @g(%x: tensor<4x8xf16>, %y: tensor<4x8xf16>) -> tensor<4x8xf16> {
  %e = kn.exp %x : tensor<4x8xf16>
  %s = kn.add %e, %y : tensor<4x8xf16>, tensor<4x8xf16> -> tensor<4x8xf16>
  func.return %s : tensor<4x8xf16>
}
"""


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    return run_tool("mirage_xdsl.tools.mirage_run", *args, env=env, timeout=timeout)


assert_one_line_error = functools.partial(one_line_error, "mirage-run")


def test_missing_file(tmp_path: Path) -> None:
    assert_one_line_error(run_cli(str(tmp_path / "nope.json")), "no such file")


def test_bad_json(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("[{]")
    proc = run_cli(str(bad))
    assert_one_line_error(proc, "bad.json")


def test_bad_mlir(tmp_path: Path) -> None:
    bad = tmp_path / "bad.mlir"
    bad.write_text("func.func @g( {")
    assert_one_line_error(run_cli(str(bad)), "")


def test_usage_errors_exit_1(tmp_path: Path) -> None:
    f = tmp_path / "g.mlir"
    f.write_text(KN_ONLY)
    assert_one_line_error(run_cli(str(f), "--era", "Z"), "invalid choice")
    assert_one_line_error(run_cli(str(f), "--graph", "1", "--all"), "not allowed with argument")
    assert_one_line_error(run_cli(str(f), "--atol-rel", "-1"), "--atol-rel must be positive")
    assert run_cli("--help").returncode == 0


def test_graph_out_of_range(mugraph_dir: Path) -> None:
    proc = run_cli(str(mugraph_dir / "lora.json"), "--graph", "99")
    assert_one_line_error(proc, "the file has 4 graphs (0..3)")
    proc = run_cli(str(mugraph_dir / "lora.json"), "--graph", "graph_x")
    assert_one_line_error(proc, "--graph graph_x: no such graph")


def test_load_module_mlir(tmp_path: Path) -> None:
    f = tmp_path / "g.mlir"
    f.write_text(KN_ONLY)
    module = mirage_run.load_module(f)
    funcs = mirage_run.functions(module)
    assert [fn.sym_name.data for fn in funcs] == ["g"]


class _Fn:
    def __init__(self, name: str):
        class _S:
            data = name

        self.sym_name = _S()


def test_select() -> None:
    funcs = [_Fn(f"graph_{i}") for i in range(3)]
    assert select(funcs, None, True) == (funcs, None)
    chosen, note = select(funcs, None, False)
    assert chosen == funcs[:1] and note is not None and "3 graphs" in note
    assert select(funcs[:1], None, False) == (funcs[:1], None)
    assert select(funcs, "2", False)[0] == [funcs[2]]
    assert select(funcs, "graph_1", False)[0] == [funcs[1]]
    with pytest.raises(mirage_run.RunError, match="0..2"):
        select(funcs, "3", False)
    with pytest.raises(mirage_run.RunError, match="no kernel graph"):
        select([], None, False)


def test_relative_error_and_rotation() -> None:
    ref = [np.array([1.0, -4.0]), np.array([[2.0]])]
    assert relative_error([np.array([1.0, -4.0]), np.array([[2.0]])], ref) == 0.0
    assert relative_error([np.array([1.0, -3.0]), np.array([[2.0]])], ref) == pytest.approx(0.25)
    assert relative_error([np.array([np.nan, -4.0]), np.array([[2.0]])], ref) == math.inf
    assert relative_error([np.array([1.0]), np.array([[2.0]])], ref) == math.inf
    assert relative_error(ref[:1], ref) == math.inf
    assert rotation_sets(48 * 2**20) == 4
    assert rotation_sets(10**10) == 2
    assert rotation_sets(1000) == 8


def _needs_compiler() -> None:
    pytest.importorskip("mirage_xdsl.passes.pipeline", reason="the mirage-transpile pipeline is not there yet")
    pytest.importorskip("mirage_xdsl.codegen.cuda_target", reason="emit_cuda is not there yet")


@pytest.mark.skipif(has_gpu(), reason="tests the no-GPU path")
def test_no_gpu_path_on_shared_file(mugraph_dir: Path, tmp_path: Path) -> None:
    _needs_compiler()
    from mirage_xdsl.driver.nvcc import find_nvcc

    proc = run_cli(str(mugraph_dir / "rmsnorm_bs1.json"), "--graph", "0", "--check", "--cache-dir", str(tmp_path), "--seed", "7")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "seed 7" in out
    assert "graph_0" in out
    if find_nvcc() is not None:
        assert "no GPU found: compiled " in out and "reference executed, GPU run skipped" in out
        assert list(tmp_path.glob("*.cubin")), "the cubin is cached"
    else:
        assert "no GPU found and no nvcc" in out


@pytest.mark.skipif(has_gpu(), reason="tests the no-GPU path")
def test_no_gpu_path_on_kn_only_mlir(tmp_path: Path) -> None:
    _needs_compiler()
    f = tmp_path / "g.mlir"
    f.write_text(KN_ONLY)
    proc = run_cli(str(f), "--check", "--cache-dir", str(tmp_path / "cache"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "no GPU found" in proc.stdout
    # the default pipeline fuses a plain kernel graph (kn-fuse) into a generated kernel
    from mirage_xdsl.driver.nvcc import find_nvcc

    if find_nvcc() is not None:
        assert "compiled 1 kernels" in proc.stdout


@pytest.mark.gpu
def test_gpu_check_and_bench(mugraph_dir: Path, tmp_path: Path) -> None:
    _needs_compiler()
    proc = run_cli(str(mugraph_dir / "lora.json"), "--all", "--check", "--bench", "--cache-dir", str(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = [ln for ln in proc.stdout.splitlines() if ln.startswith("graph_")]
    assert len(rows) == 4 and all(" ok " in ln for ln in rows), proc.stdout

