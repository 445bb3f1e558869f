"""Ctrl-C (issue #29 item 5): `mirage-bench` and `mirage-run` stop within seconds with one
line `<prog>: interrupted` and exit status 130, killing the nvcc runs in flight and saving
nothing half-written.

nvcc is a script that records its pid and sleeps, so each tool is interrupted while its
compiles are running (in `mirage-bench`: inside the pool's workers).  The tools run in a
subprocess and get SIGINT the way a terminal's Ctrl-C delivers it to the foreground
process (only the main process here: the workers lead their own process groups).
"""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mirage_xdsl.bench import prepare

REPO = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 120.0
"""Time for the tool to reach nvcc (imports and the pipeline on a slow 2-core CI machine)."""
EXIT_TIMEOUT_S = 10.0


@pytest.fixture
def sleeping_nvcc(tmp_path: Path) -> tuple[Path, Path]:
    """(fake nvcc, file of the pids of its compiles): each compile sleeps for a minute."""
    pids = tmp_path / "nvcc.pids"
    script = tmp_path / "bin" / "nvcc"
    script.parent.mkdir()
    script.write_text(
        f"""#!/bin/sh
if [ "$1" = "--version" ]; then echo "Cuda compilation tools, release 99.9, V99.9.1"; exit 0; fi
echo $$ >> {pids}
exec sleep 60
"""
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script, pids


def _alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie waiting for a reaper counts as ended)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        try:
            os.kill(pid, 0)
        except OSError:
            return False
        return True
    return state not in ("Z", "X")


def _interrupt_when_compiling(cmd: list[str], pids: Path, env: dict[str, str]) -> tuple[int, str, float, list[int]]:
    """Start `cmd`, send SIGINT once nvcc runs; (exit status, stderr, seconds to exit, nvcc pids)."""
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not (pids.is_file() and pids.read_text().strip()):
            if proc.poll() is not None or time.monotonic() > deadline:
                out, err = proc.communicate(timeout=EXIT_TIMEOUT_S) if proc.poll() is not None else ("", "")
                pytest.fail(f"nvcc never ran (exit {proc.returncode}):\n{out}\n{err}")
            time.sleep(0.1)
        time.sleep(0.3)  # let the other worker reach nvcc too
        start = time.monotonic()
        proc.send_signal(signal.SIGINT)
        try:
            _, err = proc.communicate(timeout=EXIT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"still running {EXIT_TIMEOUT_S} s after SIGINT")
        elapsed = time.monotonic() - start
    finally:
        if proc.poll() is None:
            proc.kill()
            try:
                proc.communicate(timeout=5)
            except subprocess.TimeoutExpired:  # orphaned workers still hold the pipes
                pass
    return proc.returncode, err, elapsed, [int(p) for p in pids.read_text().split()]


def _env(nvcc: Path, tmp_path: Path) -> dict[str, str]:
    return dict(os.environ, MIRAGE_XDSL_NVCC=str(nvcc), MIRAGE_XDSL_CACHE_DIR=str(tmp_path / "nvcc-cache"), PYTHONUNBUFFERED="1")


def _assert_clean_exit(prog: str, code: int, err: str, nvcc_pids: list[int]) -> None:
    assert code == 130, err
    assert "Traceback" not in err, err
    assert err.strip().splitlines() == [f"{prog}: interrupted"], err
    deadline = time.monotonic() + 3.0
    while any(_alive(p) for p in nvcc_pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [p for p in nvcc_pids if _alive(p)], "an nvcc run outlived the interrupt"


def test_mirage_bench_ctrl_c_stops_the_pool(sleeping_nvcc: tuple[Path, Path], tmp_path: Path) -> None:
    nvcc, pids = sleeping_nvcc
    prep = tmp_path / "prep"
    cmd = [sys.executable, "-m", "mirage_xdsl.tools.mirage_bench", "--prepare-only", str(prep),
           "--files", "rmsnorm_linear.mlir", "--no-cache", "--jobs", "2", "--arch", "sm_90", "--seed", "1"]
    code, err, elapsed, nvcc_pids = _interrupt_when_compiling(cmd, pids, _env(nvcc, tmp_path))
    _assert_clean_exit("mirage-bench", code, err, nvcc_pids)
    assert elapsed < EXIT_TIMEOUT_S
    assert not (prep / "manifest.json").exists()  # nothing saved as if complete


def test_mirage_run_ctrl_c(sleeping_nvcc: tuple[Path, Path], tmp_path: Path) -> None:
    nvcc, pids = sleeping_nvcc
    cmd = [sys.executable, "-m", "mirage_xdsl.tools.mirage_run", "examples/rmsnorm_linear.mlir", "--seed", "1",
           "--cache-dir", str(tmp_path / "nvcc-cache")]
    code, err, _, nvcc_pids = _interrupt_when_compiling(cmd, pids, _env(nvcc, tmp_path))
    _assert_clean_exit("mirage-run", code, err, nvcc_pids)
    cache = tmp_path / "nvcc-cache"
    leftovers = [p.name for p in cache.iterdir()] if cache.is_dir() else []
    assert not [n for n in leftovers if n.endswith(".cubin") or n.startswith("mirage_nvcc_")], leftovers


def _gone(pid: int | None) -> bool:
    """Whether process `pid` has ended (no such process, or a zombie waiting to be reaped)."""
    if pid is None:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state in ("Z", "X")


def test_stop_pool_ends_busy_workers_at_once() -> None:
    """`stop_pool` returns within its grace period even while every worker is busy."""
    from concurrent.futures import ProcessPoolExecutor

    pool = ProcessPoolExecutor(max_workers=2, initializer=prepare._worker_init)
    futures = [pool.submit(time.sleep, 60) for _ in range(8)]
    time.sleep(0.5)  # the workers have started the first two
    workers = list(pool._processes.values())  # type: ignore[attr-defined]
    start = time.monotonic()
    prepare.stop_pool(pool)
    assert time.monotonic() - start < prepare.STOP_GRACE_S + 2.0
    # killed: gone within seconds even on a busy machine.  Not `is_alive()`: when the pool's
    # management thread reaps a worker first, multiprocessing's poll() fails and the worker
    # reads as alive forever (the flake of two clean-clone CI runs).
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline and not all(_gone(w.pid) for w in workers):
        time.sleep(0.05)
    assert all(_gone(w.pid) for w in workers)
    # calls never handed to a worker are cancelled; how many the pool had already queued
    # ahead of its two workers depends on timing (a busy CI machine queues more)
    assert sum(f.cancelled() for f in futures) >= 3
    prepare.stop_pool(None)  # nothing to stop
