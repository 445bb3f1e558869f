"""Shared pytest fixtures: the location of Mirage's saved muGraphs and the GPU marker."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

# examples/mugraphs (in the repository), or $MIRAGE_SHARED/mugraphs when MIRAGE_SHARED is set
SHARED = os.environ.get("MIRAGE_SHARED")
MUGRAPHS = Path(SHARED) / "mugraphs" if SHARED else Path(__file__).resolve().parents[1] / "examples" / "mugraphs"
MUGRAPH_FILES = sorted(MUGRAPHS.glob("*.json"))


@pytest.fixture(scope="session")
def mugraph_dir() -> Path:
    if not MUGRAPHS.is_dir():
        pytest.skip(f"saved muGraphs not found at {MUGRAPHS} (check MIRAGE_SHARED)")
    return MUGRAPHS


def has_gpu() -> bool:
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # noqa: BLE001 - no CuPy, no driver, no device: all mean "no GPU"
        return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if has_gpu():
        return
    skip = pytest.mark.skip(reason="no NVIDIA GPU found (CuPy reports no device)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def run_tool(module: str, *args: str, env: dict[str, str] | None = None, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    """Run one of our command-line tools (`python -m <module> args...`), capturing its output."""
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        capture_output=True,
        text=True,
        env=dict(os.environ, **(env or {})),
        timeout=timeout,
    )


def assert_one_line_error(prog: str, proc: subprocess.CompletedProcess[str], needle: str) -> None:
    """The tool failed the way a user should see it: exit 1, one stderr line `<prog>: error:
    ...` containing `needle`, no traceback."""
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"{prog}: error: ") and needle in lines[0], lines[0]


@pytest.fixture
def fake_nvcc(tmp_path: Path) -> tuple[str, Path]:
    """An executable standing in for nvcc: answers --version, writes a fake cubin to -o,
    fails on sources containing FAIL, and logs every compile to a file."""
    log = tmp_path / "nvcc.log"
    script = tmp_path / "bin" / "nvcc"
    script.parent.mkdir()
    script.write_text(
        f"""#!/bin/sh
if [ "$1" = "--version" ]; then echo "Cuda compilation tools, release 99.9, V99.9.1"; exit 0; fi
out=""; src=""; prev=""
for a in "$@"; do
  if [ "$prev" = "-o" ]; then out="$a"; fi
  case "$a" in *.cu) src="$a";; esac
  prev="$a"
done
echo "$@" >> {log}
if grep -q FAIL "$src"; then echo "$src(1): error: identifier FAIL is undefined" >&2; exit 2; fi
printf 'CUBIN:' > "$out"; cat "$src" >> "$out"
"""
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script), log


def nvcc_runs(log: Path) -> int:
    """How many compiles the fake nvcc has logged."""
    return len(log.read_text().splitlines()) if log.exists() else 0


def transpiled(module, **options):  # type: ignore[no-untyped-def]
    """A verified clone of kernel-graph `module` after `mirage-transpile` with `options` (the
    pass's options and tuning-point fields, `MirageTranspilePass.from_options`)."""
    from mirage_xdsl.driver.compile import make_context
    from mirage_xdsl.passes.pipeline import MirageTranspilePass

    low = module.clone()
    MirageTranspilePass.from_options(options).apply(make_context(), low)
    low.verify()
    return low
