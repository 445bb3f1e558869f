"""Errors about the target's limits, as the passes and the printer raise them.

A module of its own because it builds on xDSL's diagnostics, while `target/device.py` stays
importable where only compiled graphs run (a GPU machine without xDSL).
"""

from __future__ import annotations

from xdsl.utils.exceptions import PassFailedException


class SharedMemoryExceeded(PassFailedException):
    """A kernel needs more shared memory per block than the target allows.

    Raised by `tb-plan-smem` (the planned tiles do not fit `smem-limit`) and by the CUDA
    printer (a kernel's launch needs more than the architecture's opt-in maximum). Callers
    that choose among plans (kn-partition) or report candidates (mirage-run, mirage-bench)
    test for this type instead of matching message text; Mirage rejects such candidates too.

    Attributes:
        needed: bytes of shared memory per block the kernel needs.
        limit: bytes allowed.
    """

    def __init__(self, message: str, needed: int, limit: int):
        super().__init__(message)
        self.needed = needed
        self.limit = limit
