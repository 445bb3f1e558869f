"""Transformations of seed-004 contraction configs: `optimizer.Optimizer` (pure Python) and,
in `passes.py`, the same transformations as xDSL module passes on `contraction.contract`."""
