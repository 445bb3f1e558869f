"""nvcc and its cubin cache (driver/nvcc.py), `compile()` on a machine without a GPU, and
autotuning over plan ranks without one.

CPU tests fake nvcc with a small script (counting its runs) or use the real one when it is
installed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import has_gpu
from conftest import nvcc_runs as _runs
from runtime_plans import TINY_KERNEL

from mirage_xdsl.driver import nvcc as compiler
from mirage_xdsl.driver.nvcc import (
    CudaCompileError,
    NvccNotFoundError,
    cache_key,
    compile_cuda,
    default_cache_dir,
    find_nvcc,
    normalize_arch,
)
from mirage_xdsl.runtime.executable import CompiledGraph
from mirage_xdsl.runtime.validate import LaunchError

# ---------------------------------------------------------------------------------------
# nvcc and the cache


def test_cache_hit_skips_nvcc(fake_nvcc: tuple[str, Path], tmp_path: Path) -> None:
    nvcc, log = fake_nvcc
    cache = tmp_path / "cache"
    first = compile_cuda("// a\n", "sm_90", cache_dir=cache, nvcc=nvcc)
    assert _runs(log) == 1
    assert first.parent == cache and first.suffix == ".cubin"
    assert first.read_bytes() == b"CUBIN:// a\n"
    again = compile_cuda("// a\n", "sm_90", cache_dir=cache, nvcc=nvcc)
    assert again == first and _runs(log) == 1  # no second nvcc run
    # the options are what the issue asks for
    line = log.read_text()
    for opt in ("-cubin", "-std=c++17", "-O3", "--expt-relaxed-constexpr", "-arch=sm_90", f"-I{compiler.CODEGEN_INCLUDE}"):
        assert opt in line.split()


def test_cache_key_covers_source_arch_options_version(
    fake_nvcc: tuple[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    nvcc, log = fake_nvcc
    cache = tmp_path / "cache"
    a = compile_cuda("// a\n", "sm_90", cache_dir=cache, nvcc=nvcc)
    b = compile_cuda("// b\n", "sm_90", cache_dir=cache, nvcc=nvcc)
    c = compile_cuda("// a\n", "sm_80", cache_dir=cache, nvcc=nvcc)
    monkeypatch.setenv("MIRAGE_XDSL_NVCC_FLAGS", "-lineinfo")
    d = compile_cuda("// a\n", "sm_90", cache_dir=cache, nvcc=nvcc)
    assert len({a, b, c, d}) == 4 and _runs(log) == 4
    opts = ["-O3"]
    assert cache_key("x", opts, "v1", "sm_90") == cache_key("x", opts, "v1", "90")
    assert cache_key("x", opts, "v1", "sm_90") != cache_key("x", opts, "v2", "sm_90")
    assert cache_key("x", opts, "v1", "sm_90") != cache_key("x", ["-O2"], "v1", "sm_90")
    assert len(cache_key("x", opts, "v1", "sm_90")) == 64


def test_cache_dir_from_env_and_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MIRAGE_XDSL_CACHE_DIR", str(tmp_path / "env"))
    assert default_cache_dir() == tmp_path / "env"
    assert default_cache_dir(tmp_path / "arg") == tmp_path / "arg"
    monkeypatch.delenv("MIRAGE_XDSL_CACHE_DIR")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_cache_dir() == tmp_path / "home" / ".cache" / "mirage_xdsl"


def test_cache_write_is_atomic(fake_nvcc: tuple[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    nvcc, _ = fake_nvcc
    cache = tmp_path / "cache"
    seen: list[tuple[str, str]] = []
    real_replace = os.replace

    def failing_replace(src: str, dst: str) -> None:
        seen.append((str(src), str(dst)))
        assert not Path(dst).exists()  # the final name appears only through the rename
        assert Path(src).parent == Path(dst).parent  # same directory: os.replace is atomic
        raise OSError("disk full")

    monkeypatch.setattr(compiler.os, "replace", failing_replace)
    with pytest.raises(OSError, match="disk full"):
        compile_cuda("// atomic\n", "sm_90", cache_dir=cache, nvcc=nvcc)
    assert seen
    assert not list(cache.glob("*.cubin")), "no partial cubin under the final name"
    assert not list(cache.glob(".*.tmp")), "the temporary file is removed"
    monkeypatch.setattr(compiler.os, "replace", real_replace)
    path = compile_cuda("// atomic\n", "sm_90", cache_dir=cache, nvcc=nvcc)
    assert path.read_bytes() == b"CUBIN:// atomic\n"


def test_compile_error_is_reported_and_source_kept(fake_nvcc: tuple[str, Path], tmp_path: Path) -> None:
    nvcc, _ = fake_nvcc
    with pytest.raises(CudaCompileError, match="identifier FAIL is undefined") as info:
        compile_cuda("FAIL\n", "sm_90", cache_dir=tmp_path, nvcc=nvcc)
    kept = list(tmp_path.glob("failed-*.cu"))
    assert len(kept) == 1 and kept[0].read_text() == "FAIL\n"
    assert str(kept[0]) in str(info.value)
    assert not list(tmp_path.glob("*.cubin"))


def test_nvcc_not_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MIRAGE_XDSL_NVCC", str(tmp_path / "missing-nvcc"))
    assert find_nvcc() is None
    with pytest.raises(NvccNotFoundError, match="nvcc not found"):
        compile_cuda("// x\n", "sm_90", cache_dir=tmp_path)


def test_normalize_arch() -> None:
    assert normalize_arch("sm_90") == "sm_90"
    assert normalize_arch("90") == "sm_90"
    assert normalize_arch(90) == "sm_90"
    assert normalize_arch("sm_90a") == "sm_90a"
    assert normalize_arch("compute_80") == "sm_80"
    with pytest.raises(ValueError, match="unknown CUDA architecture"):
        normalize_arch("hopper")


@pytest.mark.skipif(find_nvcc() is None, reason="nvcc not installed")
def test_real_nvcc_compiles_tiny_kernel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = compile_cuda(TINY_KERNEL, "sm_90", cache_dir=tmp_path)
    assert path.read_bytes()[:4] == b"\x7fELF"
    assert b"scale2" in path.read_bytes()  # the extern "C" kernel's symbol

    def no_nvcc(cmd: list[str]) -> None:
        raise AssertionError(f"nvcc ran again: {cmd}")

    monkeypatch.setattr(compiler, "_run_nvcc", no_nvcc)
    assert compile_cuda(TINY_KERNEL, "sm_90", cache_dir=tmp_path) == path


@pytest.mark.skipif(find_nvcc() is None, reason="nvcc not installed")
def test_real_nvcc_error(tmp_path: Path) -> None:
    with pytest.raises(CudaCompileError, match="error"):
        compile_cuda("extern \"C\" __global__ void k() { undefined_fn(); }", "sm_90", cache_dir=tmp_path)


# ---------------------------------------------------------------------------------------
# compile() without a GPU


@pytest.mark.skipif(find_nvcc() is None, reason="nvcc not installed")
def test_compile_on_cpu_only_machine(mugraph_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("mirage_xdsl.passes.pipeline", reason="the mirage-transpile pipeline is not there yet")
    pytest.importorskip("mirage_xdsl.codegen.cuda_target", reason="emit_cuda is not there yet")
    import mirage_xdsl
    from mirage_xdsl.frontends.mugraph_import import load_mugraph_file

    module = load_mugraph_file(mugraph_dir / "lora.json")
    before = str(module)
    g = mirage_xdsl.compile(module, "graph_1", "sm_90", cache_dir=tmp_path)
    assert str(module) == before, "compile() works on a clone"
    assert isinstance(g, CompiledGraph) and g.func_name == "graph_1" and g.arch == "sm_90"
    assert g.cubin_path is not None and g.cubin_path.read_bytes()[:4] == b"\x7fELF"
    assert g.kernel_names and all(k.encode() in g.cubin_path.read_bytes() for k in g.kernel_names)
    assert [s.shape for s in g.plan.inputs] == [(16, 256), (256, 4096), (256, 16), (16, 4096)]
    if not has_gpu():
        assert not g.loaded
        with pytest.raises(LaunchError):
            g()

    def no_nvcc(cmd: list[str]) -> None:
        raise AssertionError("the second compile of the same graph ran nvcc")

    monkeypatch.setattr(compiler, "_run_nvcc", no_nvcc)
    again = mirage_xdsl.compile(module, "graph_1", "sm_90", cache_dir=tmp_path)
    assert again.cubin_path == g.cubin_path
    with pytest.raises(ValueError, match="the module has 4 functions"):
        mirage_xdsl.compile(module, cache_dir=tmp_path)
    with pytest.raises(ValueError, match="no function named 'graph_9'"):
        mirage_xdsl.compile(module, "graph_9", cache_dir=tmp_path)


# ---------------------------------------------------------------------------------------
# autotuning over plan ranks


def test_pick_fastest_keeps_the_earlier_on_ties_and_failures() -> None:
    from mirage_xdsl.driver.compile import pick_fastest

    times = {"a": 20.0, "b": None, "c": 12.5, "d": 12.5}
    assert pick_fastest(list("abcd"), times.get) == (2, [20.0, None, 12.5, 12.5])
    assert pick_fastest(list("b"), times.get)[0] == 0  # nothing timed: the cheapest estimate
    assert pick_fastest(list("ba"), times.get)[0] == 1


def test_prepare_candidates_and_autotune_without_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """Plan ranks give different kernels for gated_mlp; `compile(autotune=k)` without a GPU
    is plain `compile` (rank 0, nothing timed)."""
    import mirage_xdsl.driver.compile as ex
    from mirage_xdsl.tools.mirage_run import load_module

    module = load_module(Path(__file__).resolve().parents[2] / "examples" / "gated_mlp.mlir")
    sources = {ex.prepare(module, arch="sm_90", candidate=r).program.source for r in range(3)}
    assert len(sources) == 3
    monkeypatch.setattr(ex, "gpu_available", lambda: False)
    monkeypatch.setattr(ex, "_autotuned", lambda *a, **k: pytest.fail("autotuned without a GPU"))
    monkeypatch.setattr(ex, "_compiled", lambda prepared, *a: prepared)
    chosen = ex.compile(module, arch="sm_90", autotune=4)
    assert chosen.program.source == ex.prepare(module, arch="sm_90").program.source
