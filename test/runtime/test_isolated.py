"""driver/isolated.py: one replaceable worker process (the fuzzer's GPU phase, the tuner's
measurements).  CPU only: a worker that returns, raises, dies or hangs."""

from __future__ import annotations

import multiprocessing
import os
import time

import pytest

from mirage_xdsl.driver.isolated import IsolatedWorker, WorkerLost


def _double(x: int) -> int:
    return 2 * x


def _fail() -> None:
    raise ValueError("bad genome")


def _die() -> None:
    os._exit(3)


def _pid() -> int:
    return os.getpid()


def test_results_errors_deaths_and_hangs() -> None:
    worker = IsolatedWorker(multiprocessing.get_context("spawn"))
    try:
        assert worker.call(_double, 21, timeout=60) == 42
        first = worker.call(_pid, timeout=60)
        with pytest.raises(ValueError, match="bad genome"):  # fn's own error: the worker stays
            worker.call(_fail, timeout=60)
        assert worker.call(_pid, timeout=60) == first
        with pytest.raises(WorkerLost):  # the process died: replaced by the next call
            worker.call(_die, timeout=60)
        assert worker.call(_pid, timeout=60) != first
        start = time.monotonic()
        with pytest.raises(WorkerLost):  # hung: killed after the timeout
            worker.call(time.sleep, 60, timeout=1.0)
        assert time.monotonic() - start < 10
        assert worker.call(_double, 1, timeout=60) == 2
    finally:
        worker.close()
