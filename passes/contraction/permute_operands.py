"""`contraction-permute-operands`: insert the transposes a contraction needs for a GEMM view.

    mirage-opt einsum.mlir -p contraction-permute-operands

The sm_90a GEMM reads its operands through TMA without copies (`gemm_view`): after fusing
contiguous dimensions A must be one [C..,] M x K block with K contiguous, B one K x N or
N x K block.  Contractions from coupled-cluster codes interleave the index kinds, e.g.
`aebf,dfce->abcd` (A's M dims a, b are split by the K dim e): no fusion gives one M, N or K
dimension, and no stride trick helps.  For every `contraction.contract` without a GEMM view
this pass chooses new row-major layouts for A and/or B and materialises them with
`contraction.permute` ops in front of the contraction (whose A/B strides it rewrites); the
output's layout is the caller's and is kept.

Choice (issue #31 item "two contractions whose operands torch must permute first"): the
candidate layouts of A are its own and [C.., M.., K..]; of B its own, [C.., K.., N..]
(N-contiguous) and [C.., N.., K..] (K-contiguous); C, M and N dims in the output's order,
the K dims in A's or in B's order (the same in both).  Of the candidates with a GEMM view the
one copying the fewest bytes wins (each copy reads and writes its operand once); ties keep
the earlier candidate (own layouts first, A's K order first, N-contiguous B first).  An op
whose operands cannot be described as permuted axes (dims split or fused by the optimizer
passes) or for which no candidate has a view fails with the reason.
"""

from __future__ import annotations

import copy
import itertools
import math
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.ir import SSAValue
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from mirage_xdsl.dialects.contraction.config import Config, DimType
from mirage_xdsl.dialects.contraction.ops import ContractOp
from mirage_xdsl.dialects.contraction.permute import PermuteOp
from mirage_xdsl.passes.contraction.gemm_view import gemm_view

A, B, OUT = 0, 1, 2


@dataclass(frozen=True)
class OperandLayouts:
    """The chosen layouts: per operand (A, B) the config dims in their new row-major order,
    or None where the operand stays as it is; `copied_elements` counts the elements moved."""

    a: tuple[int, ...] | None
    b: tuple[int, ...] | None
    copied_elements: int


def axes_of(config: Config, tensor: int, shape: list[int]) -> dict[int, int]:
    """Config dim -> axis of the row-major `shape` it indexes, for the dims indexing `tensor`.

    Raises:
        ValueError: the dims are not the tensor's axes (a size or stride without a matching
            axis, or fewer/more dims than axes): the tensor was split or fused beforehand.
    """
    rows = [math.prod(shape[i + 1 :]) for i in range(len(shape))]
    dims = [d for d in range(config.num_dims) if config.strides[tensor][d] != 0]
    found: dict[int, int] = {}
    for d in dims:
        match = [
            i
            for i in range(len(shape))
            if i not in found.values() and shape[i] == config.dim_sizes[d] and rows[i] == config.strides[tensor][d]
        ]
        if not match:
            break
        found[d] = match[0]
    if len(found) != len(dims) or len(dims) != len(shape):
        name = "AB"[tensor]
        raise ValueError(
            f"the dimensions indexing {name} are not the axes of its row-major tensor<{'x'.join(map(str, shape))}> "
            "(split or fused beforehand); run contraction-permute-operands before the optimizer passes"
        )
    return found


def _in_order(config: Config, tensor: int, dims: list[int]) -> list[int]:
    """`dims` sorted outermost first in `tensor` (by decreasing stride)."""
    return sorted(dims, key=lambda d: -config.strides[tensor][d])


def candidate_orders(config: Config) -> tuple[list[tuple[int, ...] | None], list[tuple[int, ...] | None]]:
    """The candidate dim orders of A and of B (module docstring); None = keep the operand.

    Raises:
        Nothing.
    """
    of = {t: [d for d in range(config.num_dims) if config.dim_types[d] is t] for t in DimType}
    cs, ms, ns = (_in_order(config, OUT, of[t]) for t in (DimType.C, DimType.M, DimType.N))
    k_orders = [tuple(_in_order(config, A, of[DimType.K])), tuple(_in_order(config, B, of[DimType.K]))]
    k_orders = list(dict.fromkeys(k_orders))
    a_orders: list[tuple[int, ...] | None] = [None] + [(*cs, *ms, *k) for k in k_orders]
    b_orders: list[tuple[int, ...] | None] = [None]
    for k in k_orders:
        b_orders += [(*cs, *k, *ns), (*cs, *ns, *k)]
    return a_orders, b_orders


def with_layouts(config: Config, a: tuple[int, ...] | None, b: tuple[int, ...] | None) -> Config:
    """`config` with A and/or B re-laid out row-major in the given dim orders.

    Raises:
        Nothing.
    """
    new = copy.deepcopy(config)
    for tensor, order in ((A, a), (B, b)):
        if order is None:
            continue
        step = 1
        strides = [0] * config.num_dims
        for d in reversed(order):
            strides[d] = step
            step *= config.dim_sizes[d]
        new.strides[tensor] = strides
    return new


def choose_layouts(config: Config, elem_bytes: int = 2) -> OperandLayouts:
    """The cheapest operand layouts with a GEMM view (module docstring).

    Raises:
        ValueError: no candidate has a GEMM view (the message of the unpermuted op's
            `gemm_view` and why permuting A and B does not help).
    """
    elements = [math.prod(s for s, st in zip(config.dim_sizes, config.strides[t]) if st) for t in (A, B)]
    best: OperandLayouts | None = None
    reason = ""
    a_orders, b_orders = candidate_orders(config)
    for a, b in itertools.product(a_orders, b_orders):
        cost = (elements[A] if a is not None else 0) + (elements[B] if b is not None else 0)
        if best is not None and cost >= best.copied_elements:
            continue
        try:
            gemm_view(with_layouts(config, a, b), elem_bytes)
        except ValueError as err:
            reason = str(err)  # the last candidate permutes both operands: its reason is the telling one
            continue
        best = OperandLayouts(a, b, cost)
    if best is None:
        raise ValueError(
            f"no row-major permutation of A and B gives a GEMM view (with A and B permuted: {reason}); the output "
            "keeps its layout, so its M dims and its N dims must each be adjacent, N innermost"
        )
    return best


def _shape(value: SSAValue) -> list[int]:
    tensor = value.type
    assert isinstance(tensor, TensorType)
    return list(tensor.get_shape())


@dataclass(frozen=True)
class PermuteOperandsPass(ModulePass):
    """Insert `contraction.permute` ops so that every contraction has a GEMM view (module docstring).

    Raises:
        PassFailedException: an op whose operands are not plain axes, or for which no
            permutation of A and B gives a view (the op named, the reason).
    """

    name = "contraction-permute-operands"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        """Permute the operands of each contraction.contract in `op` that has no GEMM view.

        Raises:
            PassFailedException: see the class docstring.
        """
        for contract in [o for o in op.walk() if isinstance(o, ContractOp)]:
            config = contract.config()
            elem = config.data_type.bytes
            try:
                gemm_view(config, elem)
                continue
            except ValueError:
                pass
            try:
                axes = [axes_of(config, t, _shape(v)) for t, v in ((A, contract.lhs), (B, contract.rhs))]
                layouts = choose_layouts(config, elem)
            except ValueError as err:
                raise PassFailedException(f"{self.name}: {contract.name}: {err}") from err
            block = contract.parent_block()
            assert block is not None
            for tensor, order in ((A, layouts.a), (B, layouts.b)):
                if order is None:
                    continue
                operand = contract.operands[tensor]
                permute = PermuteOp(operand, [axes[tensor][d] for d in order])
                block.insert_op_before(permute, contract)
                contract.operands[tensor] = permute.result
            contract.set_config(with_layouts(config, layouts.a, layouts.b), contract.is_scheduled)
