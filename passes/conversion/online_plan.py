"""Online-softmax attention plans that lower to a flash register chain: which plans qualify
and the shared-memory operand traffic the cost model charges them
(`plan_cost.CostModel`; the chain itself: `register_chain.find_online_chains`,
`mx::mma_chain_online_run` in codegen/include/mirage_xdsl/mma.cuh).
"""

from __future__ import annotations

import math

from mirage_xdsl.passes.conversion.kernel_plan import KernelPlan
from mirage_xdsl.passes.conversion.plan_group import elem_bytes, is_attention
from mirage_xdsl.passes.conversion.register_chain import online_chain_fits


def _matmuls(plan: KernelPlan) -> list[int]:
    return [n for n in plan.needed if plan.group.nodes[n].kind == "matmul" and n not in plan.skipped]


def online_chain_rows(plan: KernelPlan) -> int:
    """Query rows per block of an online-softmax attention plan that convert-tb-to-cute lowers
    to a flash `cute.mma_chain` (`register_chain.online_chain_fits`: 4 warps of 16 or 32 rows,
    all keys per warp, P @ V and the score tile within the register budget); 0 if not."""
    if plan.online is None or not is_attention(plan.group):
        return 0
    matmuls = _matmuls(plan)
    if len(matmuls) != 2:
        return 0
    rows, keys = plan.tiles[matmuls[0]][-2:]
    d = plan.tiles[matmuls[1]][-1]
    return rows if online_chain_fits(rows, keys, d) else 0


def online_chain_smem_bytes(plan: KernelPlan) -> int:
    """Bytes of MMA operand fragments the warps of an online chain read from shared memory over
    the whole grid: per block and iteration its query rows once (each warp its own) and the
    key and value tiles once per warp (every warp owns all keys).  `plan` must have the
    two matmuls `online_chain_rows` admits."""
    group = plan.group
    first, second = _matmuls(plan)
    a = group.nodes[first].args[0]
    eb = elem_bytes(group.nodes[a].dtype)
    rows, k1 = plan.tiles[a][-2:]
    keys, d = plan.tiles[first][-1], plan.tiles[second][-1]
    warps = plan.threads // 32
    per_iter = rows * k1 * eb + warps * (k1 * keys + keys * d) * eb
    return math.prod(plan.grid) * plan.forloop_range * per_iter
