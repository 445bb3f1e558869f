"""Shared pytest fixtures: the location of ../shared (muGraphs) and the GPU marker."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

SHARED = Path(os.environ.get("MIRAGE_SHARED", Path(__file__).resolve().parents[2] / "shared"))
MUGRAPHS = SHARED / "mugraphs"
MUGRAPH_FILES = sorted(MUGRAPHS.glob("*.json"))


@pytest.fixture(scope="session")
def mugraph_dir() -> Path:
    if not MUGRAPHS.is_dir():
        pytest.skip(f"shared muGraphs not found at {MUGRAPHS} (set MIRAGE_SHARED)")
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
