"""`convert-tb-to-cute`: lower every scheduled, memory-planned `kn.customized` to a `cute.kernel`
(mirage-notes 3.8-3.9; the IR contract of passes/README.md, steps 3-10).

Input: the threadblock graph after `tb-plan-smem`, ops in execution order with `tb.chain` /
`tb.chain_pos`, `tb.stage` / `tb.level`, `tb.strides`, `tb.swizzle`, `tb.smem_offset` (and
`tb.smem_offsets_pipeline` on pipelined inputs), `tb.chunked` / `tb.pipelined` /
`tb.accum_in_reg`, `tb.iter_dim` on chain leaders, `tb.smem_size` on the customized op.
A missing attribute is a located error naming the pass that writes it.

Output (the `cute` dialect, `dialects/cute/`), one straight-line program per kernel:

    smem_alloc ...                    every materialised tile at its planned offset(s)
                                      (N stage buffers for a pipelined input)
    copy_g2s (pre-loop inputs)        sync / 16-B chunked
    fill (shared accumulators), mma_init (register accumulators)
    copy_g2s async [it k] + commit    prologue: iterations k = 0 .. N-2 of every
                                      cp.async-pipelined input, one commit group each
    barrier
    for %it = 0 to R {
      copy_g2s async [%it + N-1] ... commit, cp_async_wait N-1   (prefetch; stage (it+N-1) % N)
      copy_g2s [%it] (other iterated inputs)
      barrier / chains by level (a barrier wherever tb.level changes)
      barrier
    }
    barrier, frag_store (register accumulators), barrier
    post-loop chains and copy_s2g by level

Chains (tb-fusion-chains) become one op each: a matmul leader `mma_init` + `mma` +
`frag_store` (the unary ops as an epilogue on the fragment, a trailing `nored` as `add`),
reductions `cute.reduce`, everything else `cute.elementwise` / `cute.concat`.  Accumulator
tiles of multi-iteration graphs are fp32 (`layout_math.stores_fp32`), register fragments
always.  The MMA atom and the warp layout (tg_m, tg_n) follow Mirage's data-moved score
(mirage-notes 3.9); option `tensor_cores=false` (or non-fp16/bf16 operands) selects the
CUDA-core `UniversalFMA` fallback.  Flash decoding's loop body (`P = exp(Q @ K)`, `L += P`,
`O += P @ V`, see passes/conversion/register_chain.py) becomes one `cute.mma_chain`: P stays in
registers, L accumulates in P's fragment layout and is stored after the loop like the
register accumulators, the warps split the keys of `P @ V`.  An online-softmax body (running max, `exp(S - max)`,
rescaled row sums and `P @ V`, the values tb-schedule marked `tb.in_registers`) becomes one
`cute.mma_chain ... online` (FlashAttention-2's loop).

Modules: `tiled_mma.py` (the MMA atom and warp layout), `tb_to_cute_base.py` (attribute
reads, tiles, errors), `tb_to_cute_io.py` (tile allocation, input and output copies),
`tb_to_cute_chains.py` (chains, grid sums, MMAs, register chains); this module builds each
kernel in execution order and is the pass.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, UnitAttr
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter
from xdsl.utils.exceptions import PassFailedException

from mirage_xdsl.dialects import cute, tb
from mirage_xdsl.dialects.kn import CustomizedOp, element_type_of, shape_of
from mirage_xdsl.dialects.kn.strides import dtensor_strides
from mirage_xdsl.passes.conversion.register_chain import IN_REGISTERS
from mirage_xdsl.passes.conversion.tb_to_cute_base import MAX_OFFSET, Chain, ConvertError, convert_error
from mirage_xdsl.passes.conversion.tb_to_cute_chains import ChainLowering
from mirage_xdsl.passes.conversion.tb_to_cute_io import IoLowering


class _KernelBuilder(IoLowering, ChainLowering):
    """Builds the `cute.kernel` of one `kn.customized` (see the module docstring)."""

    def build(self) -> cute.KernelOp:
        """The `cute.kernel` of `graph` (the program of the module docstring): tile allocations,
        pre-loop copies, accumulator initialisation, the cp.async prologue, the for-loop, the stores of
        the register accumulators, then the post-loop chains with the grid sums; the customized op's
        `kn.*` attributes are kept.

        Raises:
            ConvertError: a missing or malformed planning attribute, an unsupported element type,
                kernel strides of another rank or past 32-bit element offsets, a value tb-schedule
                planned in registers that no `cute.mma_chain` holds, an op other than `tb.input`
                before the loop, or a rule of the tile, copy and chain lowerings.
        """
        graph = self.graph
        smem_size = self.int_attr(graph, "tb.smem_size")
        ops = list(graph.body.block.ops)
        out_index = {op: r for op, r, _ in self.graph.output_slots()}
        out_types = list(graph.outputs.types)
        in_types = list(graph.inputs.types)
        self.kernel_arg_strides = [dtensor_strides(v) for v in graph.outputs] + [
            dtensor_strides(v) for v in graph.inputs
        ]
        for v, st in zip([*graph.outputs, *graph.inputs], self.kernel_arg_strides):
            dims = shape_of(v)
            self.check_element_type(graph, element_type_of(v))
            if len(st) != len(dims):
                raise convert_error(graph, f"strides {st} do not match the rank of {dims}")
            if sum((d - 1) * s for d, s in zip(dims, st)) > MAX_OFFSET:
                raise convert_error(graph, f"a DTensor of shape {dims} with strides {st} exceeds 32-bit element offsets")

        block = Block(arg_types=[*out_types, *in_types])
        kargs = list(block.args)
        for i, arg in enumerate(kargs):
            arg.name_hint = f"o{i}" if i < len(out_types) else f"i{i - len(out_types)}"

        allocs = self.alloc_tiles(ops)
        chains = self.chains(ops)
        body: list[Operation] = list(allocs)
        fused = self.register_chains(chains)
        fused_by_op = {op: rc for rc in fused for op in rc.ops}
        for op in ops:
            if IN_REGISTERS in op.attributes and op not in fused_by_op:
                raise convert_error(
                    op,
                    "tb-schedule planned this value in registers (an online register chain) but no "
                    "cute.mma_chain can hold it here (tensor cores off?); run tb-schedule for this lowering",
                )

        # prologue: accumulator state
        reg_accums: dict[Operation, SSAValue] = {}
        inits: list[Operation] = []
        for rc in fused:
            p_shape = shape_of(rc.first_matmul.result)[-2:]
            init = cute.MmaInitOp(cute.FragmentType(p_shape, self.chain_sum_mma(rc)))
            init.result.name_hint = f"psum{len(self.chain_sums)}"
            self.chain_sums[rc] = init.result
            inits.append(init)
            if rc.online is not None:  # its P @ V accumulator (nored_rescale) lives in registers too
                acc_init = cute.MmaInitOp(self.chain_acc_type(rc))
                acc_init.result.name_hint = f"racc{len(reg_accums)}"
                reg_accums[rc.second[-1]] = acc_init.result
                inits.append(acc_init)
        for ch in chains:
            lead = ch.ops[0]
            if self.is_register_accum(ch):
                fusion = fused_by_op.get(lead)
                frag_type = self.chain_acc_type(fusion) if fusion is not None else self.matmul_parts(ch)[1]
                init = cute.MmaInitOp(frag_type)
                init.result.name_hint = f"racc{len(reg_accums)}"
                reg_accums[ch.ops[-1]] = init.result
                inits.append(init)
                continue
            if lead in fused_by_op:
                continue  # the row-sum accumulator of a cute.mma_chain lives in registers
            for op in ch.ops:
                if isinstance(op, tb.ForloopAccumOp):
                    fill_value = float("-inf") if op.accum_kind == "max" else 0.0
                    fill = cute.FillOp(self.tile(op, op.result), fill_value)
                    if "tb.accum_in_reg" in op.attributes:
                        # an elementwise-chain accumulator tb-plan-smem planned as living in
                        # registers through the loop: the printer must keep it there
                        fill.attributes[cute.ACCUM_IN_REG] = UnitAttr()
                    inits.append(fill)
            if isinstance(lead, tb.ReductionMaxOp) and ch.stage == "loop":
                inits.append(cute.FillOp(self.tile(lead, lead.max), float("-inf")))

        by_stage: dict[str, list[Chain]] = {"pre": [], "loop": [], "post": []}
        for ch in chains:
            by_stage[ch.stage].append(ch)

        def emit_stage(stage_chains: Sequence[Chain], iv: SSAValue | None) -> list[Operation]:
            out: list[Operation] = []
            prev_level: int | None = None
            pending_async = False
            for ch in stage_chains:
                fusion = fused_by_op.get(ch.ops[0])
                if fusion is not None and ch.ops[0] is not fusion.first[0]:
                    continue  # lowered with its chain's first matmul (no level of its own, no barrier)
                if prev_level is not None and ch.level != prev_level:
                    if pending_async:
                        out += [cute.CpAsyncCommitOp(), cute.CpAsyncWaitOp(self.num_stages - 1)]
                        pending_async = False
                    out.append(cute.BarrierOp())
                prev_level = ch.level
                lead = ch.ops[0]
                if fusion is not None:
                    out += self.lower_register_chain(fusion, reg_accums)
                elif isinstance(lead, tb.InputOp):
                    out += self.lower_input(lead, kargs, iv, prologue=None)
                    pending_async |= lead in self.pipelined
                elif isinstance(lead, tb.OutputOp):
                    out += self.lower_output(lead, out_index[lead], kargs)
                else:
                    out += self.lower_chain(ch, reg_accums)
            if pending_async:
                out += [cute.CpAsyncCommitOp(), cute.CpAsyncWaitOp(self.num_stages - 1)]
            return out

        for ch in by_stage["pre"]:
            if not isinstance(ch.ops[0], tb.InputOp):
                raise convert_error(ch.ops[0], "only tb.input ops run before the loop (tb.stage = \"pre\")")
        body += emit_stage(by_stage["pre"], None)
        body += inits
        prologue = [op for op in ops if op in self.pipelined]
        if prologue:
            # iterations 0 .. N-2 in flight before the loop, one commit group per iteration
            # (iteration it waits for its own group with N-1 younger groups pending)
            # (an empty group past the last iteration keeps that count right)
            for k in range(self.num_stages - 1):
                for op in prologue if k < self.iters else ():
                    assert isinstance(op, tb.InputOp)
                    body += self.lower_input(op, kargs, None, prologue=k)
                body.append(cute.CpAsyncCommitOp())
        body.append(cute.BarrierOp())

        loop = cute.ForOp(self.iters)
        loop.iv.name_hint = "it"
        loop_body = emit_stage(by_stage["loop"], loop.iv)
        if by_stage["loop"]:
            loop_body.append(cute.BarrierOp())
        loop.body.block.insert_ops_before(loop_body, loop.body.block.last_op)  # type: ignore[arg-type]
        if by_stage["loop"]:
            body.append(loop)

        if reg_accums:
            for op, frag in reg_accums.items():
                body.append(cute.FragStoreOp(frag, self.tile(op, op.results[0]), [], "store"))
            for rc, frag in self.chain_sums.items():
                body.append(cute.FragStoreOp(frag, self.tile(rc.total, rc.total.result), [], "store"))
            body.append(cute.BarrierOp())
        post = by_stage["post"]
        sums = [ch for ch in post if isinstance(ch.ops[0], tb.GridSumOp)]
        if sums:
            post = [ch for ch in post if ch not in sums]
            feeding = [ch for ch in post if ch.level < sums[0].level]
            if feeding:  # e.g. a reduction that shrinks a partial before it is summed
                body += emit_stage(feeding, None) + [cute.BarrierOp()]
            body += self.lower_grid_sums(sums, post)
            post = [ch for ch in post if ch not in feeding]
        body += emit_stage(post, None)
        # P of a cute.mma_chain (and the scores, maxima and rescale factors of an online one)
        # was planned a shared tile (tb-plan-smem runs before this lowering decides) that
        # nothing reads now
        p_tiles = {self.smem.get(rc.first[-1].results[0]) for rc in fused}
        p_tiles |= {self.smem.get(v) for rc in fused if rc.online is not None for op in rc.online.ops for v in op.results}
        body = [op for op in body if not (isinstance(op, cute.SmemAllocOp) and op.result in p_tiles and not op.result.uses)]
        block.add_ops(body)

        kernel = cute.KernelOp(
            self.name,
            list(graph.inputs),
            out_types,
            Region(block),
            grid=graph.grid,
            block=graph.block,
            smem_size=smem_size,
            forloop_range=self.iters,
            arg_strides=self.kernel_arg_strides,
        )
        for key, value in graph.attributes.items():
            if key.startswith("kn."):
                kernel.attributes[key] = value
        return kernel


def kernel_name(func_name: str, index: int) -> str:
    """`<func>_k<i>` as a C identifier (characters outside [A-Za-z0-9_] become '_')."""
    ident = re.sub(r"[^A-Za-z0-9_]", "_", f"{func_name}_k{index}")
    return ident if not ident[0].isdigit() else f"k_{ident}"


@dataclass(frozen=True)
class ConvertTbToCutePass(ModulePass):
    """Lower every `kn.customized` (after tb-plan-smem) to a `cute.kernel` named
    `<func>_k<i>` (i counts the customized ops of the function in program order)."""

    name = "convert-tb-to-cute"

    tensor_cores: bool = True
    """Use SM80 `mma.sync` atoms for fp16/bf16 matmuls (else the UniversalFMA fallback)."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        """Replace each `kn.customized` of every func in `op` with its `cute.kernel` (`<func>_k<i>`).

        Raises:
            PassFailedException: a missing or malformed planning attribute, an unsupported element
                type or op (the located `ConvertError` message, emitted on the op).
        """
        rewriter = Rewriter()
        for fn in [o for o in op.walk() if isinstance(o, func.FuncOp)]:
            graphs = [o for o in fn.walk() if isinstance(o, CustomizedOp)]
            for i, graph in enumerate(graphs):
                try:
                    name = kernel_name(fn.sym_name.data, i)
                    kernel = _KernelBuilder(graph, name, self.tensor_cores).build()
                except ConvertError as err:
                    err.op.emit_error(err.message, PassFailedException(err.message))
                rewriter.replace_op(graph, kernel)
