"""The `tb` dialect: Mirage's threadblock graph (shared-memory tiles), nested in `kn.customized`.

Execution model of one block (mirage-notes 1.4): inputs with `forloop_dim = -1` load once
before the loop; for each of `forloop_range` iterations every iterated input loads its
tile and every op whose operands are not `after_accum` runs; accumulators fold their
input; after the loop the `after_accum` ops run once and `tb.output` stores the tiles.
`after_accum` is part of the STensor type: accumulators produce it, every other op
propagates it, and binary ops/matmul/concat require their operands to agree.

Modules: `stensor.py` (the STensor type, `TbOp`), `io_ops.py`, `compute_ops.py`, `mask_ops.py` (`tb.causal_mask`), `accum_ops.py`,
`dialect.py` (the `Threadblock` dialect).  The compute ops subclass the abstract bases that `kn`
shares (`dialects/common/op_bases.py`); the for-loop accumulator, grid sum and I/O ops are tb-only.
"""

from mirage_xdsl.dialects.tb.accum_ops import *  # noqa: F403
from mirage_xdsl.dialects.tb.compute_ops import *  # noqa: F403
from mirage_xdsl.dialects.tb.dialect import *  # noqa: F403
from mirage_xdsl.dialects.tb.io_ops import *  # noqa: F403
from mirage_xdsl.dialects.tb.mask_ops import *  # noqa: F403
from mirage_xdsl.dialects.tb.stensor import *  # noqa: F403
