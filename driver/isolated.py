"""One replaceable worker process for work that may break its process: GPU runs of generated
kernels (an illegal address leaves the CUDA context unusable for every later launch; a hung
kernel never returns).  The fuzzer's GPU phase and the tuner's measurements run through it.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from concurrent.futures.process import BrokenProcessPool
from typing import Any


class WorkerLost(RuntimeError):
    """The worker process died or did not answer in time; it has been ended."""


class IsolatedWorker:
    """A single spawned worker process, started when first needed.

    Args:
        ctx: the multiprocessing context (spawn: the worker must not inherit a CUDA context).
        initializer: run first in each new worker process (None: nothing).
    """

    def __init__(self, ctx: Any, initializer: Callable[[], None] | None = None):
        self.ctx = ctx
        self.initializer = initializer
        self.pool: ProcessPoolExecutor | None = None

    def call(self, fn: Callable[..., Any], *args: Any, timeout: float) -> Any:
        """`fn(*args)` in the worker, its result within `timeout` seconds.

        Raises:
            WorkerLost: the process died or hung; it is ended (the next call starts a new one).
            Exception: whatever `fn` raised, as it raised it.
        """
        if self.pool is None:
            self.pool = ProcessPoolExecutor(max_workers=1, mp_context=self.ctx, initializer=self.initializer)
        try:
            return self.pool.submit(fn, *args).result(timeout=timeout)
        except (BrokenProcessPool, FutureTimeout) as err:  # died or hung; anything else is fn's own
            self.close()
            raise WorkerLost(f"{type(err).__name__}: {err}".strip()) from err

    def close(self) -> None:
        """End the worker now (killed, not waited for: a hung kernel never returns)."""
        if self.pool is None:
            return
        for proc in list(getattr(self.pool, "_processes", {}).values()):
            proc.kill()
        self.pool.shutdown(wait=False, cancel_futures=True)
        self.pool = None
