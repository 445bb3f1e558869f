"""`convert-contraction-to-tb`: a scheduled `contraction.contract` -> one `kn.customized`.

    mirage-opt einsum.mlir -p 'contraction-make-executable,convert-contraction-to-tb'

The portable path of a contraction (the existing mma.sync code generation: any sm_80+ GPU,
small shapes, the host emulator), from the seed-004 schedule that contraction-make-executable
chose (issue #31 item 2):

- PAR dimensions -> the grid: x = the N tiles, y = the M tiles, z = the batch (C); the
  product of the PAR sizes of each type is that axis's extent;
- SEQ dimensions (all K: rule 1 keeps K off the grid) -> the for-loop, `forloop_range` =
  the product of their sizes, walking K in steps of the PRIM K extent;
- PRIM dimensions -> the MMA tile: `tb.input` tiles [1,] m_prim x k_prim and k_prim x n_prim,
  `tb.matmul` (mma.sync m16n8k16 in the printer), `tb.forloop_accum nored` (fp32
  accumulators in registers), `tb.output`.

The operands must already be the GEMM's row-major tensors, A [C,] M x K, B [C,] K x N, out
[C,] M x N (one dimension per type after fusing contiguous ones, as `gemm_view` finds them);
other layouts and a SEQ dimension of type M or N (an output loop inside a block) are
rejected with the reason.  ELWISE_MUL: the factor D is a third input of the kernel, its tile
loaded once per block (forloop_dim -1, the output's map), and each loop step's product is
multiplied by it before the `nored` accumulator: sum_t (A_t B_t) * D = (A B) * D (a
threadblock graph has no op that combines an after-loop tile with a loaded one).  The L2 block order (m_l2 x n_l2 groups)
has no threadblock-graph form: blocks run in the grid's row-major order here; the sm_90 path
(convert-contraction-to-hopper) implements the grouped order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.ir import Block, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from mirage_xdsl.dialects import kn, tb
from mirage_xdsl.dialects.contraction.config import Config, DimType, ExecType
from mirage_xdsl.dialects.contraction.ops import ContractOp
from mirage_xdsl.passes.contraction.gemm_view import gemm_view


@dataclass(frozen=True)
class TbSchedule:
    """What the threadblock graph takes from a scheduled config (sizes in elements)."""

    batch: int
    m: int
    n: int
    k: int
    m_prim: int
    n_prim: int
    k_prim: int

    @property
    def grid(self) -> tuple[int, int, int]:
        """(N tiles, M tiles, batch)."""
        return (self.n // self.n_prim, self.m // self.m_prim, self.batch)

    @property
    def forloop_range(self) -> int:
        """K steps of k_prim."""
        return self.k // self.k_prim


def tb_schedule(config: Config) -> TbSchedule:
    """Read the grid, loop and tile of a scheduled config (module docstring).

    Raises:
        ValueError: a SEQ dimension of type M, N or C, or a GEMM view that is not the
            operands' own row-major [C,] M x K, K x N, M x N layout.
    """
    for d in range(config.num_dims):
        if config.exec_types[d] is ExecType.SEQ and config.dim_types[d] is not DimType.K:
            raise ValueError(
                f"{config.describe_dim(d)} is SEQ: an output loop inside one block has no threadblock-graph form; "
                "make it PAR (contraction-make-executable does)"
            )

    def prim(t: DimType) -> int:
        return math.prod(
            s for s, dt, et in zip(config.dim_sizes, config.dim_types, config.exec_types) if dt is t and et is ExecType.PRIM
        )

    view = gemm_view(config)
    if view.batch_outer != 1 or not view.trans_b:
        raise ValueError("the threadblock path needs one batch dimension and B contiguous along N; use convert-contraction-to-hopper")
    mk, kn_, mn = view.m * view.k, view.k * view.n, view.m * view.n
    batch = view.batch_inner
    want = ((view.k, mk if batch > 1 else 0, 0), (view.n, 1, kn_ if batch > 1 else 0, 0), (view.n, mn if batch > 1 else 0, 0))
    if (view.a_strides, view.b_strides, view.out_strides) != want:
        raise ValueError(
            "the threadblock path needs the operands as row-major [C,] M x K, K x N and M x N tensors "
            "(e.g. cmk,ckn->cmn); reshape them, or use convert-contraction-to-hopper"
        )
    return TbSchedule(batch, view.m, view.n, view.k, prim(DimType.M), prim(DimType.N), prim(DimType.K))


def _shape(value: SSAValue) -> list[int]:
    typ = value.type
    assert isinstance(typ, TensorType)
    return list(typ.get_shape())


@dataclass(frozen=True)
class ConvertContractionToTbPass(ModulePass):
    """Lower every scheduled `contraction.contract` to a `kn.customized` (module docstring).

    Option `threads`: threads per block (default 128: four warps of mma.sync).

    Raises:
        PassFailedException: an unscheduled op, or `tb_schedule`'s reasons (the op named).
    """

    name = "convert-contraction-to-tb"
    threads: int = 128

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        """Replace each contraction.contract with the `kn.customized` of its `tb_schedule`.

        Raises:
            PassFailedException: the op has no exec types, `tb_schedule` rejected it, or its
                operand shapes are not row-major [C,] M x K, K x N -> M x N.
        """
        for contract in [o for o in op.walk() if isinstance(o, ContractOp)]:
            where = f"{self.name}: {contract.name}"
            if not contract.is_scheduled:
                raise PassFailedException(f"{where}: the op has no exec types; run contraction-make-executable first")
            config = contract.config()
            try:
                sched = tb_schedule(config)
            except ValueError as err:
                raise PassFailedException(f"{where}: {err}") from err
            batched = len(_shape(contract.lhs)) == 3
            c = [sched.batch] if batched else []
            want = (c + [sched.m, sched.k], c + [sched.k, sched.n], c + [sched.m, sched.n])
            got = (_shape(contract.lhs), _shape(contract.rhs), _shape(contract.result))
            if got != want or (sched.batch > 1 and not batched):
                raise PassFailedException(
                    f"{where}: the threadblock path needs the operands as row-major [C,] M x K, K x N and M x N "
                    f"tensors, {want}, got {got}; reshape them, or use convert-contraction-to-hopper"
                )
            new = _customized(contract, sched, batched, self.threads)
            block = contract.parent_block()
            assert block is not None
            block.insert_op_before(new, contract)
            contract.result.replace_all_uses_with(new.results[0])
            block.erase_op(contract)


def _customized(contract: ContractOp, s: TbSchedule, batched: bool, threads: int) -> kn.CustomizedOp:
    """The kn.customized op: grid (N tiles, M tiles, batch), one matmul per loop step; with an
    ELWISE_MUL factor D, each step's product times D's tile (loaded once, forloop_dim -1)."""
    operands = [contract.lhs, contract.rhs] + ([contract.mul] if contract.mul is not None else [])
    body = Block(arg_types=[v.type for v in operands])
    a, b = body.args[:2]
    if batched:
        ta = tb.InputOp(a, (-1, 1, 0), 2, (1, s.m_prim, s.k_prim))
        tbb = tb.InputOp(b, (2, -1, 0), 1, (1, s.k_prim, s.n_prim))
        omap = (2, 1, 0)
    else:
        ta = tb.InputOp(a, (-1, 0, -1), 1, (s.m_prim, s.k_prim))
        tbb = tb.InputOp(b, (1, -1, -1), 0, (s.k_prim, s.n_prim))
        omap = (1, 0, -1)
    mm = tb.MatmulOp(ta.results[0], tbb.results[0])
    ops: list[Operation] = [ta, tbb, mm]
    step = mm.results[0]
    if contract.mul is not None:
        td = tb.InputOp(body.args[2], omap, -1, ((1,) if batched else ()) + (s.m_prim, s.n_prim))
        scaled = tb.MulOp(step, td.results[0])
        ops += [td, scaled]
        step = scaled.results[0]
    acc = tb.ForloopAccumOp(step, "nored")
    out = tb.OutputOp(acc.results[0], omap)
    body.add_ops([*ops, acc, out])
    return kn.CustomizedOp(
        operands,
        [contract.result.type],
        body,
        grid_dim=s.grid,
        block_dim=(threads, 1, 1),
        forloop_range=s.forloop_range,
    )
