"""convert-tb-to-cute, fusion chains: each chain of tb-fusion-chains becomes one op -- a
matmul leader `cute.mma_init` + `cute.mma` + `cute.frag_store` (unary ops as the fragment's
epilogue, a trailing `nored` as `add`), reductions `cute.reduce`, grid sums `cute.grid_sum`,
a causal mask `cute.causal_mask`, everything else `cute.elementwise` / `cute.concat` -- and flash decoding's
`matmul -> exp -> matmul` one `cute.mma_chain` (passes/conversion/register_chain.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.ir import Operation, SSAValue

from mirage_xdsl.dialects import cute, tb
from mirage_xdsl.dialects.kn import element_type_of, shape_of
from mirage_xdsl.passes.conversion.register_chain import (
    RegisterChain,
    chain_thr_layout,
    find_online_chains,
    find_register_chains,
    online_chain_mma,
)
from mirage_xdsl.passes.conversion.tb_to_cute_base import (
    BINARY_FN,
    UNARY_FN,
    Chain,
    KernelBuilderBase,
    convert_error,
    cute_numel,
    reduce_threads,
)
from mirage_xdsl.passes.conversion.tiled_mma import choose_tiled_mma, mma_atom_for


class ChainLowering(KernelBuilderBase):
    """Chain lowering (a mixin of `tb_to_cute._KernelBuilder`)."""

    def split_chain(self, chain: Chain) -> tuple[Operation, list[cute.UnaryFnAttr], str, SSAValue]:
        """(leader, epilogue, store mode, destination tile) of a chain: mode `add` after a
        `nored` accumulator, `rescale` after a `nored_rescale` one (its scale: `chain_scale`)."""
        ops = chain.ops
        leader, tail = ops[0], ops[-1]
        body = ops[1:]
        mode = "store"
        if len(ops) > 1 and isinstance(tail, tb.ForloopAccumOp):
            if tail.accum_kind not in ("nored", "nored_rescale"):
                raise convert_error(tail, f"only a nored or nored_rescale accumulator can end a chain, got {tail.accum_kind}")
            mode = "add" if tail.accum_kind == "nored" else "rescale"
            body = ops[1:-1]
        dst = self.tile(tail, tail.results[0])
        return leader, self.epilogue_of(body), mode, dst

    def chain_scale(self, chain: Chain) -> list[SSAValue]:
        """The scale tile of a chain that ends in a `nored_rescale` accumulator (the last input
        of its `cute.elementwise`), else nothing."""
        tail = chain.ops[-1]
        if len(chain.ops) > 1 and isinstance(tail, tb.ForloopAccumOp) and tail.accum_kind == "nored_rescale":
            assert tail.rescale is not None
            return [self.tile(tail, tail.rescale)]
        return []

    def lower_chain(self, chain: Chain, reg_accums: dict[Operation, SSAValue]) -> list[Operation]:
        """The cute ops of one fusion chain, dispatched on its leader.

        Matmuls go to `lower_matmul`; accumulators become a `cute.elementwise` add / max /
        rescale into the accumulator tile; reductions become `cute.reduce` (threads per output
        from `reduce_threads`); unary, binary and concat leaders become `cute.elementwise` /
        `cute.concat` with the rest of the chain as epilogue.  `reg_accums` maps accumulators
        that live in registers to their fragment.

        Raises:
            ConvertError: an op fused after an accumulator or `tb.reduction_max`, an undecomposed
                accumulator kind or `tb.rms_norm`, or an op with no CuTe lowering.
        """
        ops = chain.ops
        leader = ops[0]
        if isinstance(leader, tb.MatmulOp):
            return self.lower_matmul(chain, reg_accums)
        if isinstance(leader, tb.ForloopAccumOp):
            if len(ops) != 1:
                raise convert_error(ops[1], "nothing can be fused after an accumulator (its result lives after the loop)")
            dst = self.tile(leader, leader.result)
            x = self.tile(leader, leader.input)
            rank = len(shape_of(leader.result))
            order = self.order_for(leader, rank)
            kind = leader.accum_kind
            if kind == "nored":
                return [cute.ElementwiseOp("id", [x], dst, [], "add", order)]
            if kind == "max":
                return [cute.ElementwiseOp("id", [x], dst, [], "max", order)]
            if kind == "nored_rescale":
                assert leader.rescale is not None
                s = self.tile(leader, leader.rescale)
                return [cute.ElementwiseOp("id", [x, s], dst, [], "rescale", order)]
            raise convert_error(
                leader,
                f"accumulator kind '{kind}' must be decomposed first; run tb-decompose-accumulators",
            )
        if isinstance(leader, tb.ReductionMaxOp):
            if len(ops) != 1:
                raise convert_error(ops[1], "nothing can be fused after tb.reduction_max (two results)")
            x = self.tile(leader, leader.input)
            outs = [self.tile(leader, leader.max), self.tile(leader, leader.diff)]
            rank = len(shape_of(leader.input))
            d = leader.reduce_dim
            shape = shape_of(leader.input)
            g = reduce_threads(cute_numel(shape_of(leader.max)), shape[d], self.nt)
            return [cute.ReduceOp("max", x, outs, d, 1, g, [], "store", self.order_for(leader, rank, avoid=d))]
        _, rest, mode, dst = self.split_chain(chain)
        rank = len(shape_of(leader.results[0]))
        if isinstance(leader, (tb.ReductionOp, tb.ReductionToDimxOp, tb.ReduceMaxOp)):
            x = self.tile(leader, leader.input)
            shape = shape_of(leader.input)
            d = leader.reduce_dim
            group = shape_of(leader.result)[d]
            g = reduce_threads(cute_numel(shape_of(leader.result)), shape[d] // group, self.nt)
            # strided groups: walking the reduced dim itself is fine (and coalesced) when group > 1
            order = self.order_for(leader, rank, avoid=d if group == 1 and rank > 1 else None)
            kind = "max" if isinstance(leader, tb.ReduceMaxOp) else "sum"
            return [cute.ReduceOp(kind, x, [dst], d, group, g, rest, mode, order)]
        order = self.order_for(leader, rank)
        if isinstance(leader, tb.CausalMaskOp):
            if mode not in ("store", "add"):
                raise convert_error(leader, f"a causal mask chain ends in mode '{mode}'; only store and add lower")
            x = self.tile(leader, leader.input)
            rows, cols = leader.index_origin(self.iters)
            return [cute.CausalMaskOp(x, dst, leader.offset_value, rows, cols, rest, mode, order)]
        scale = self.chain_scale(chain)
        if type(leader) in UNARY_FN:
            x = self.tile(leader, leader.operands[0])
            return [cute.ElementwiseOp("id", [x, *scale], dst, self.epilogue_of([leader]) + rest, mode, order)]
        if type(leader) in BINARY_FN:
            a = self.tile(leader, leader.operands[0])
            b = self.tile(leader, leader.operands[1])
            return [cute.ElementwiseOp(BINARY_FN[type(leader)], [a, b, *scale], dst, rest, mode, order)]
        if mode == "rescale":
            raise convert_error(
                leader, f"a chain led by {leader.name} cannot end in a nored_rescale accumulator (only elementwise leaders)"
            )
        if isinstance(leader, tb.ConcatOp):
            a = self.tile(leader, leader.lhs)
            b = self.tile(leader, leader.rhs)
            return [cute.ConcatOp(a, b, dst, leader.dim.value.data, rest, mode, order)]
        if isinstance(leader, tb.RmsNormOp):
            raise convert_error(leader, "tb.rms_norm must be decomposed first; run tb-decompose-accumulators")
        raise convert_error(leader, f"{leader.name} has no CuTe lowering")

    def lower_grid_sums(self, sums: Sequence[Chain], rest: Sequence[Chain]) -> list[Operation]:
        """Every `tb.grid_sum` of the graph as ONE `cute.grid_sum` (one synchronisation of the
        split blocks) and a barrier.  tb-schedule puts them on one post-loop level, after the
        post-loop ops that feed them (`rest` below that level) and before all others."""
        ops = [ch.ops[0] for ch in sums]
        for ch in sums:
            if len(ch.ops) != 1:
                raise convert_error(ch.ops[1], "an op is fused onto a tb.grid_sum; run tb-fusion-chains on this graph again")
        level = sums[0].level
        late = [ch for ch in sums if ch.level != level] + [ch for ch in rest if ch.level == level]
        if late:
            raise convert_error(
                late[0].ops[0],
                "tb.grid_sum ops must share one post-loop level, after the ops that feed them and before every other "
                "post-loop op; run tb-schedule",
            )
        ins = [self.tile(op, op.operands[0]) for op in ops]
        outs = [self.tile(op, op.results[0]) for op in ops]
        # one axis for all of them: the kn.customized verifier's rule
        return [cute.GridSumOp(ins, outs, ops[0].grid_axis), cute.BarrierOp()]  # type: ignore[attr-defined]

    def matmul_parts(self, chain: Chain) -> tuple[tb.MatmulOp, cute.FragmentType]:
        """The chain's leading `tb.matmul` and the fragment type of its m x n result (tiled MMA by
        `choose_tiled_mma` from the shared-memory operand tiles' shapes and element types).
        """
        mm = chain.ops[0]
        assert isinstance(mm, tb.MatmulOp)
        a, b = self.tile(mm, mm.lhs), self.tile(mm, mm.rhs)
        ta, tb_ = a.type, b.type
        assert isinstance(ta, cute.SmemTensorType) and isinstance(tb_, cute.SmemTensorType)
        m, k = ta.get_shape()[-2:]
        n = tb_.get_shape()[-1]
        mma = choose_tiled_mma(m, n, k, self.nt, ta.element_type, tb_.element_type, self.tensor_cores)
        return mm, cute.FragmentType((m, n), mma)

    def is_register_accum(self, chain: Chain) -> bool:
        """Whether the chain is a loop-stage matmul + `nored` accumulator marked `tb.accum_in_reg` (an accumulator kept in registers)."""
        ops = chain.ops
        return (
            len(ops) == 2
            and isinstance(ops[0], tb.MatmulOp)
            and isinstance(ops[1], tb.ForloopAccumOp)
            and ops[1].accum_kind == "nored"
            and "tb.accum_in_reg" in ops[1].attributes
            and chain.stage == "loop"
        )

    def register_chains(self, chains: Sequence[Chain]) -> list[RegisterChain]:
        """The loop's matmul -> epilogue -> matmul chains (and online-softmax attention bodies)
        lowered to `cute.mma_chain`."""
        if not self.tensor_cores:
            return []

        loop = [ch.ops for ch in chains if ch.stage == "loop"]
        found = find_register_chains(loop, lambda op: type(op) in UNARY_FN, self.chain_mma, self.nt // 32)
        warps = self.nt // 32
        found += find_online_chains(loop, lambda op: type(op) in UNARY_FN, lambda mm: online_chain_mma(mm, warps), warps)
        # the warps' partial P @ V meet in a scratch appended to the planned shared memory
        # (mma_store, sliced K): keep the chains whose scratch still fits the block
        room = cute.MAX_SMEM_BYTES - (self.int_attr(self.graph, "tb.smem_size") + 15) // 16 * 16
        kept = []
        for rc in found:
            scratch = self.chain_acc_type(rc).slice_scratch_bytes(self.chain_sum_mma(rc).tg[1])
            if scratch <= room:
                kept.append(rc)
                room -= scratch
        return kept

    def chain_mma(self, mm: tb.MatmulOp) -> cute.TiledMmaAttr:
        """The tiled MMA of P = A @ B in a `cute.mma_chain`: one warp row per 16-row block of
        A and the remaining warps side by side along the keys (register_chain.chain_thr_layout)."""
        ta = self.tile(mm, mm.lhs).type
        assert isinstance(ta, cute.SmemTensorType)
        m, k = ta.get_shape()[-2:]
        atom = mma_atom_for(ta.element_type, element_type_of(mm.rhs), k) or "UniversalFMA"
        return cute.TiledMmaAttr(atom, chain_thr_layout(m, self.nt // 32))

    def chain_sum_mma(self, rc: RegisterChain) -> cute.TiledMmaAttr:
        """The tiled MMA of `rc`'s P (and of its row-sum fragment): `chain_mma`, or
        `register_chain.online_chain_mma` for an online chain."""
        if rc.online is not None:
            return online_chain_mma(rc.first_matmul, self.nt // 32)
        return self.chain_mma(rc.first_matmul)

    def chain_acc_type(self, rc: RegisterChain) -> cute.FragmentType:
        """The fragment of `rc`'s P @ V accumulator: the rows of P's warp layout, its key
        groups splitting K (thr_layout (TGM, 1), sliced by the printer)."""
        mma = self.chain_sum_mma(rc)
        return cute.FragmentType(shape_of(rc.second_matmul.result)[-2:], cute.TiledMmaAttr(mma.atom_name, (mma.tg[0], 1)))

    def lower_register_chain(self, rc: RegisterChain, reg_accums: dict[Operation, SSAValue]) -> list[Operation]:
        """The `cute.mma_chain` of register chain `rc` (P = epilogue(A @ B) kept in registers, then P @ C)."""
        first, second = rc.first_matmul, rc.second_matmul
        a, b, c = self.tile(first, first.lhs), self.tile(first, first.rhs), self.tile(second, second.rhs)
        epilogue = self.epilogue_of(rc.first[1:])
        online = rc.online is not None
        mask = None
        if rc.online is not None and rc.online.mask is not None:
            rows, cols = rc.online.mask.index_origin(self.iters)
            mask = (rc.online.mask.offset_value, rows, cols)
        return [cute.MmaChainOp(reg_accums[rc.second[-1]], self.chain_sums[rc], a, b, c, epilogue, online, mask)]

    def lower_matmul(self, chain: Chain, reg_accums: dict[Operation, SSAValue]) -> list[Operation]:
        """The cute ops of a matmul chain.

        `cute.mma` into the register accumulator when the chain's tail is in `reg_accums`; else
        `cute.mma_init` + `cute.mma` + `cute.frag_store` of the fragment through the chain's
        epilogue into its destination tile.

        Raises:
            ConvertError: an operand or the destination is not in shared memory, or an
                epilogue op cannot be fused.
        """
        mm, frag_type = self.matmul_parts(chain)
        a, b = self.tile(mm, mm.lhs), self.tile(mm, mm.rhs)
        if chain.ops[-1] in reg_accums:
            return [cute.MmaOp(reg_accums[chain.ops[-1]], a, b)]
        _, rest, mode, dst = self.split_chain(chain)
        init = cute.MmaInitOp(frag_type)
        init.result.name_hint = "acc"
        return [init, cute.MmaOp(init.result, a, b), cute.FragStoreOp(init.result, dst, rest, mode)]

    def chains(self, ops: Sequence[Operation]) -> list[Chain]:
        """Group `ops` (in schedule order) into chains by (`tb.stage`, `tb.chain`), position 0 first.

        Raises:
            ConvertError: a planning attribute is missing, a chain member does not follow its
                chain, or a chain's `tb.chain_pos` are not 0, 1, ... in order.
        """
        chains: list[Chain] = []
        current_id: tuple[str, int] | None = None
        for op in ops:
            stage = self.stage(op)
            level = self.int_attr(op, "tb.level")
            cid = self.int_attr(op, "tb.chain")
            pos = self.int_attr(op, "tb.chain_pos")
            key = (stage, cid)
            if chains and key == current_id and pos > 0:
                chains[-1].ops.append(op)
                continue
            if pos != 0:
                raise convert_error(op, f"chain member at position {pos} does not follow its chain (tb.chain = {cid})")
            chains.append(Chain([op], stage, level))
            current_id = key
        for ch in chains:
            poss = [self.int_attr(o, "tb.chain_pos") for o in ch.ops]
            if poss != list(range(len(poss))):
                raise convert_error(ch.ops[0], f"chain positions {poss} are not 0..{len(poss) - 1} in order")
        return chains
