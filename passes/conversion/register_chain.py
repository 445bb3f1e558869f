"""Matmul -> unary epilogue -> matmul chains whose intermediate can stay in registers.

Flash decoding's loop body is `P = exp(Q @ K)`, `L += P`, `O += P @ V`.  Lowered op by op,
P goes through shared memory twice per iteration (stored by the first MMA's epilogue, read
back by the row-sum accumulator and by the second MMA, with barriers between), and for
decode-sized tiles (16 query rows) those round trips and their address arithmetic are most
of the kernel's instructions.  When the chain has exactly that shape, convert-tb-to-cute
emits one `cute.mma_chain` instead (mx::mma_chain_run, codegen/include/mirage_xdsl/mma.cuh):
the MMA fragments of P are the A operand of the second MMA (the register reuse of
FlashAttention-2, Dao 2023), and L accumulates in registers in P's fragment layout until
the loop ends.

The pattern (all in the loop stage, chains from tb-fusion-chains):

* `first`  = [tb.matmul, unary ops...]; its result P is used by exactly two ops:
* `total`  = a `nored` tb.forloop_accum of P alone in its chain (the row-sum partials), and
* `second` = [tb.matmul with lhs P, `nored` register accumulator (`tb.accum_in_reg`)];

with 16-bit operands of one type and a first-MMA warp layout (TGM, W) over all of the
block's warps with one 16-row block per warp row (M <= 16 TGM) and an even number of atom
blocks per warp (N1 % 16W == 0).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from xdsl.dialects.builtin import BFloat16Type, Float16Type, Float32Type
from xdsl.ir import Operation, SSAValue

from mirage_xdsl.dialects import cute, tb
from mirage_xdsl.dialects.kn import element_type_of, shape_of
from mirage_xdsl.passes.conversion.tiled_mma import mma_atom_for


@dataclass(frozen=True)
class OnlineParts:
    """The online softmax between the two matmuls of an online chain: the running max of the
    scores, its rescale factor `exp(old max - new max)` and `P = exp(scores - max)`."""

    running_max: tb.ReductionMaxOp
    rescale: tb.ExpOp
    shift: tuple[tb.SubOp, tb.ExpOp]
    mask: tb.CausalMaskOp | None = None
    """a causal mask between the scores and the softmax (alone in its fusion chain), applied
    to the scores in registers"""

    @property
    def ops(self) -> tuple[Operation, ...]:
        """Every tb op of the online part."""
        return (*((self.mask,) if self.mask is not None else ()), self.running_max, self.rescale, *self.shift)


@dataclass(frozen=True)
class RegisterChain:
    """One fusible chain: the tb chains that `cute.mma_chain` replaces.  `second` is the
    matmul P @ V and its accumulator (one tb chain, or two for an online chain, whose
    `nored_rescale` accumulator stands alone); `online` the running-max part, if any."""

    first: Sequence[Operation]
    total: tb.ForloopAccumOp
    second: Sequence[Operation]
    online: OnlineParts | None = None

    @property
    def ops(self) -> tuple[Operation, ...]:
        """Every tb op the `cute.mma_chain` replaces."""
        return (*self.first, self.total, *self.second, *(self.online.ops if self.online is not None else ()))

    @property
    def first_matmul(self) -> tb.MatmulOp:
        """The `tb.matmul` that computes P (the head of `first`)."""
        mm = self.first[0]
        assert isinstance(mm, tb.MatmulOp)
        return mm

    @property
    def second_matmul(self) -> tb.MatmulOp:
        """The `tb.matmul` P @ V (the head of `second`)."""
        mm = self.second[0]
        assert isinstance(mm, tb.MatmulOp)
        return mm


def chain_thr_layout(rows: int, warps: int) -> tuple[int, int]:
    """(TGM, W) of P = A @ B in a chain: a warp row per 16-row block of A (FlashAttention-2
    gives every warp its own rows and all keys), the rest of the warps side by side along
    the keys; (1, warps) when the row blocks do not divide the warps (not fusible unless
    A has at most 16 rows)."""
    blocks = -(-rows // 16)
    return (blocks, warps // blocks) if warps % blocks == 0 else (1, warps)


def chain_shape_fits(rows: int, keys: int, thr_layout: tuple[int, int], warps: int) -> bool:
    """Whether P (rows x keys) with warp layout (TGM, W) fits `mx::mma_chain_run`: all of the
    block's warps, one 16-row block per warp row, two atom blocks per warp and k16 step."""
    tgm, w = thr_layout
    return tgm * w == warps and rows <= 16 * tgm and keys % (16 * w) == 0


ONLINE_CHAIN_WARPS = 4
"""Warps of a block running an online (flash-attention) chain: FlashAttention-2's forward
kernels use 4 warps, each owning whole rows and every key of them (Dao 2023, section 3.3)."""

ONLINE_CHAIN_ROWS = (64, 128)
"""Query rows per block of an online chain: 16 or 32 rows per warp (one or two m16 row
blocks).  A warp of 32 rows reads each key / value fragment from shared memory once for
both row blocks, half the shared-memory traffic per MMA of a 16-row warp."""

ONLINE_CHAIN_MAX_REGS = 176
"""fp32 registers per thread an online chain may hold across an iteration, per row block:
the P @ V accumulator (D / 2 per lane), the scores (N1 / 2) and P packed to 16 bits
(N1 / 4).  Ours: of the 255 a thread may address (CUDA C++ Programming Guide, Table 21)
about 80 stay for addresses, maxima and operand fragments; d = 128 fits 64-key tiles with
16-row warps (112) and 32-key tiles with 32-row warps (176), as FlashAttention-2's
head-dim-128 kernels tile them."""


def online_chain_fits(rows: int, keys: int, d: int) -> bool:
    """Whether an online-softmax attention tile -- `rows` query rows, `keys` keys per
    iteration, head dim `d` -- fits `mx::mma_chain_online_run` on `ONLINE_CHAIN_WARPS` warps
    (`ONLINE_CHAIN_ROWS`; keys in whole k16 steps; `ONLINE_CHAIN_MAX_REGS`)."""
    lo, hi = ONLINE_CHAIN_ROWS
    blocks = rows // (16 * ONLINE_CHAIN_WARPS)  # m16 row blocks per warp
    return (
        lo <= rows <= hi
        and rows % (16 * ONLINE_CHAIN_WARPS) == 0
        and keys % 16 == 0
        and d % 8 == 0
        and blocks * (d // 2 + 3 * keys // 4) <= ONLINE_CHAIN_MAX_REGS
    )


def _is_register_accum(op: Operation) -> bool:
    return isinstance(op, tb.ForloopAccumOp) and op.accum_kind == "nored" and "tb.accum_in_reg" in op.attributes


def find_register_chains(
    loop_chains: Sequence[Sequence[Operation]],
    is_unary: Callable[[Operation], bool],
    first_mma: Callable[[tb.MatmulOp], cute.TiledMmaAttr],
    warps: int,
) -> list[RegisterChain]:
    """The fusible chains among the loop stage's `loop_chains` (module docstring).
    `is_unary`: whether an op can be an epilogue function; `first_mma`: the tiled MMA the
    lowering gives a matmul chain."""
    by_leader = {ops[0]: ops for ops in loop_chains}
    found: list[RegisterChain] = []
    for first in loop_chains:
        mm = first[0]
        if not isinstance(mm, tb.MatmulOp) or not all(is_unary(op) for op in first[1:]):
            continue
        p = first[-1].results[0]
        users = {use.operation for use in p.uses}
        seconds = [u for u in users if isinstance(u, tb.MatmulOp) and u.lhs is p and u.rhs is not p]
        totals = [u for u in users if isinstance(u, tb.ForloopAccumOp)]
        if len(users) != 2 or len(seconds) != 1 or len(totals) != 1:
            continue
        total, second = totals[0], by_leader.get(seconds[0])
        if total.accum_kind != "nored" or "tb.accum_in_reg" in total.attributes or list(by_leader.get(total, ())) != [total]:
            continue
        if second is None or len(second) != 2 or not _is_register_accum(second[1]):
            continue
        if not _shapes_fit(mm, seconds[0], first_mma(mm), warps):
            continue
        found.append(RegisterChain(tuple(first), total, tuple(second)))
    return found


def _operands_fit(first: tb.MatmulOp, second: tb.MatmulOp) -> bool:
    """Whether the chain's three matmul operands (A, B of the first, B of the second) are one
    16-bit type."""
    elems = {type(element_type_of(v)) for v in (first.lhs, first.rhs, second.rhs)}
    return len(elems) == 1 and elems.pop() in (Float16Type, BFloat16Type)


def _types_fit(first: tb.MatmulOp, second: tb.MatmulOp) -> bool:
    """Whether both matmuls of a chain have 16-bit operands of one type (the first's result too)."""
    return _operands_fit(first, second) and element_type_of(first.result) == element_type_of(first.lhs)


def _online_types_fit(first: tb.MatmulOp, second: tb.MatmulOp) -> bool:
    """`_types_fit` for an online chain, whose scores may also be f32 (kn-widen-sums keeps
    attention scores in f32 up to `exp`): the chain holds them in the first MMA's f32
    accumulators either way."""
    return _operands_fit(first, second) and (
        element_type_of(first.result) == element_type_of(first.lhs) or isinstance(element_type_of(first.result), Float32Type)
    )


def _shapes_fit(first: tb.MatmulOp, second: tb.MatmulOp, mma: cute.TiledMmaAttr, warps: int) -> bool:
    if not _types_fit(first, second):
        return False
    m, n1 = shape_of(first.result)[-2:]
    return mma.atom_shape == (16, 8, 16) and chain_shape_fits(m, n1, mma.tg, warps)


def _only_user(value: SSAValue) -> Operation | None:
    users = {use.operation for use in value.uses}
    return users.pop() if len(users) == 1 else None


def find_online_chains(
    loop_chains: Sequence[Sequence[Operation]],
    is_unary: Callable[[Operation], bool],
    first_mma: Callable[[tb.MatmulOp], cute.TiledMmaAttr],
    warps: int,
) -> list[RegisterChain]:
    """The online-softmax attention bodies among the loop stage's `loop_chains`, each one
    flash `cute.mma_chain` (FlashAttention-2's loop, Dao 2023, algorithm 1):

    * `first` = [tb.matmul, unary ops...] -> S, read by a running `tb.reduction_max` and by
      `tb.sub(S, max)` only -- or by a `tb.causal_mask` alone in its chain, whose result is
      read so (the chain masks S in registers);
    * [`tb.sub`, `tb.exp`] -> P (one chain), read by the row-sum accumulator `total` and by
      the matmul P @ V only; `tb.exp(diff)` -> r, read by the two accumulators only;
    * `total` = `nored_rescale(P, r)` whose one reader after the loop is a `tb.reduction`
      of its last dim (so the chain may keep row totals instead of P's columns);
    * [tb.matmul P @ V] whose one reader is `nored_rescale(P @ V, r)`;

    16-bit operands of one type (the scores that type or f32), `ONLINE_CHAIN_WARPS` warps side by side along the rows
    (`first_mma` gives thr_layout (TGM, 1)), and a tile `online_chain_fits` admits."""
    by_leader = {ops[0]: ops for ops in loop_chains}
    found: list[RegisterChain] = []
    for first in loop_chains:
        mm = first[0]
        if not isinstance(mm, tb.MatmulOp) or not all(is_unary(op) for op in first[1:]):
            continue
        rc = _online_chain(first, by_leader)
        if rc is None:
            continue
        second = rc.second_matmul
        m, n1 = shape_of(mm.result)[-2:]
        d = shape_of(second.result)[-1]
        mma = first_mma(mm)
        if not online_chain_fits(m, n1, d) or warps != ONLINE_CHAIN_WARPS or mma.tg != (warps, 1):
            continue
        if not _online_types_fit(mm, second) or mma.atom_shape != (16, 8, 16):
            continue
        found.append(rc)
    return found


def _online_chain(first: Sequence[Operation], by_leader: dict[Operation, Sequence[Operation]]) -> RegisterChain | None:
    """The online chain starting with `first` (`find_online_chains`'s pattern), or None."""
    s = first[-1].results[0]
    users = {use.operation for use in s.uses}
    mask = users.pop() if len(users) == 1 else None
    if mask is not None:
        # scores -> tb.causal_mask (its own chain, not walked by the loop's rows) -> softmax
        if not isinstance(mask, tb.CausalMaskOp) or list(by_leader.get(mask, ())) != [mask] or mask.walked[0]:
            return None
        s = mask.result
        users = {use.operation for use in s.uses}
    rmax = next((u for u in users if isinstance(u, tb.ReductionMaxOp)), None)
    sub = next((u for u in users if isinstance(u, tb.SubOp)), None)
    if len(users) != 2 or rmax is None or sub is None or list(by_leader.get(rmax, ())) != [rmax]:
        return None
    if rmax.reduce_dim != len(shape_of(s)) - 1 or sub.lhs is not s or sub.rhs is not rmax.max:
        return None
    shift = by_leader.get(sub)
    if shift is None or len(shift) != 2 or not isinstance(shift[1], tb.ExpOp) or _only_user(rmax.max) is not sub:
        return None
    rescale = _only_user(rmax.diff)
    if not isinstance(rescale, tb.ExpOp) or list(by_leader.get(rescale, ())) != [rescale]:
        return None
    p, r = shift[1].results[0], rescale.result
    p_users = {use.operation for use in p.uses}
    total = next((u for u in p_users if isinstance(u, tb.ForloopAccumOp)), None)
    mm2 = next((u for u in p_users if isinstance(u, tb.MatmulOp)), None)
    if len(p_users) != 2 or total is None or mm2 is None or mm2.lhs is not p or mm2.rhs is p:
        return None
    acc = _only_user(mm2.result)
    if list(by_leader.get(mm2, ())) != [mm2] or not isinstance(acc, tb.ForloopAccumOp):
        return None
    for a in (total, acc):
        if a.accum_kind != "nored_rescale" or a.rescale is not r or list(by_leader.get(a, ())) != [a]:
            return None
    if {use.operation for use in r.uses} != {total, acc}:
        return None
    row_sum = _only_user(total.result)
    if not isinstance(row_sum, tb.ReductionOp) or row_sum.reduce_dim != len(shape_of(p)) - 1:
        return None
    online = OnlineParts(rmax, rescale, (sub, shift[1]), mask)  # type: ignore[arg-type]
    return RegisterChain(tuple(first), total, (mm2, acc), online)


IN_REGISTERS = "tb.in_registers"
"""Unit attribute tb-schedule writes on the tb ops of an online chain whose results never
reach shared memory (the scores, maxima, rescale factor, P and P @ V): tb-plan-smem gives
them no tile.  Their two accumulators get `tb.accum_in_reg`."""


def online_chain_mma(mm: tb.MatmulOp, warps: int) -> cute.TiledMmaAttr:
    """The tiled MMA of S = A @ B in an online chain (convert-tb-to-cute's and tb-schedule's
    alike), from the tb operand types: the 16-bit atom for A's K, the warps side by side
    along the rows (thr_layout (warps, 1): every warp owns all keys of its rows)."""
    k = shape_of(mm.lhs)[-1]
    atom = mma_atom_for(element_type_of(mm.lhs), element_type_of(mm.rhs), k) or "UniversalFMA"
    return cute.TiledMmaAttr(atom, (warps, 1))


def planned_online_chains(ops: Sequence[Operation], chain_of: Callable[[Operation], tuple[int, int]], warps: int) -> list[RegisterChain]:
    """The online chains (`find_online_chains`) of a block's `ops`, grouped into fusion chains
    by `chain_of` (op -> (chain id, position)): what tb-schedule marks `IN_REGISTERS` so that
    tb-plan-smem and convert-tb-to-cute agree."""
    groups: dict[int, list[tuple[int, Operation]]] = {}
    for op in ops:
        cid, pos = chain_of(op)
        groups.setdefault(cid, []).append((pos, op))
    chains = [[op for _, op in sorted(g, key=lambda t: t[0])] for g in groups.values()]
    return find_online_chains(chains, lambda op: isinstance(op, tb.TbUnaryOp), lambda mm: online_chain_mma(mm, warps), warps)


def online_register_values(rc: RegisterChain) -> list[Operation]:
    """The ops of online chain `rc` whose results stay in registers (`IN_REGISTERS`)."""
    assert rc.online is not None
    return [rc.first[-1], *rc.online.ops, rc.second[0]]
