"""Where the device library lives: `include/mirage_xdsl/*.cuh`, the CUDA headers every
generated translation unit includes. A module of its own (no xDSL import) so that the nvcc
driver and the host emulator can find the headers on a machine without xDSL."""

from __future__ import annotations

from pathlib import Path

DEVICE_LIBRARY_INCLUDE = Path(__file__).resolve().parent / "include"
"""The include folder holding `mirage_xdsl/*.cuh` (pass it to nvcc as `-I`)."""
