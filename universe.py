"""The `xdsl.universe` entry point: lets stock `xdsl-opt` (and other xDSL-based compilers)
load our dialects, passes and targets."""

from __future__ import annotations

from xdsl.universe import Universe

from mirage_xdsl.driver.registry import get_all_dialects, get_all_targets
from mirage_xdsl.passes import get_all_passes

MIRAGE_UNIVERSE = Universe(
    all_dialects=get_all_dialects(),
    all_passes=get_all_passes(),
    all_targets={k: v for k, v in get_all_targets().items() if k != "mlir"},
)
