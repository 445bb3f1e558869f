"""`cute` tensor-core ops: `cute.mma_init` (a register accumulator), `cute.mma`,
`cute.mma_chain` (matmul -> epilogue -> matmul with the intermediate in registers) and
`cute.frag_store`, with the sliced-K attributes cute-slice-mma writes.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import ArrayAttr, DenseArrayBase, IntegerAttr, StringAttr, UnitAttr
from xdsl.ir import Attribute, SSAValue
from xdsl.irdl import IRDLOperation, irdl_op_definition, operand_def, opt_prop_def, prop_def, result_def

from mirage_xdsl.dialects.cute.attrs import FragmentType, SmemTensorType, UnaryFnAttr, dense_ints, rule_error
from mirage_xdsl.dialects.cute.kernel import CuteOp, KernelOp, check_epilogue, check_mode, smem_type
from mirage_xdsl.dialects.cute.mask_ops import check_mask, mask_props

KSLICES = "cute.kslices"
"""`i64` on a `cute.mma_init` (written by cute-slice-mma): the accumulator's K is sliced over
this many warp groups (> 1), which meet in its scratch at `KSLICE_OFFSET`."""


KSLICE_OFFSET = "cute.kslice_offset"
"""`i64` on a sliced `cute.mma_init`: byte offset of its partial-sum scratch from the dynamic
shared-memory base (inside the kernel's `KSLICE_SCRATCH`)."""


@irdl_op_definition
class MmaInitOp(CuteOp):
    """A zeroed register accumulator for a tiled MMA.  `{cute.kslices, cute.kslice_offset}`:
    sliced K (see `KSLICES`)."""

    name = "cute.mma_init"
    result = result_def(FragmentType)
    assembly_format = "attr-dict `:` type($result)"

    def __init__(self, typ: FragmentType):
        super().__init__(result_types=[typ])


def _matmul_dims(op: IRDLOperation, a: SSAValue, b: SSAValue) -> tuple[int, int, int]:
    sa, sb = smem_type(a).get_shape(), smem_type(b).get_shape()
    if len(sa) < 2 or len(sb) < 2 or any(d != 1 for d in (*sa[:-2], *sb[:-2])):
        raise rule_error(op, f"operands {sa} and {sb} must be matrices (every leading dim 1)")
    if sa[-1] != sb[-2]:
        raise rule_error(op, f"contraction dims differ: {sa[-1]} vs {sb[-2]}")
    return sa[-2], sb[-1], sa[-1]


@irdl_op_definition
class MmaOp(CuteOp):
    """`acc += A @ B` over the whole K of the tiles (zero-padding non-divisible M/N/K)."""

    name = "cute.mma"
    acc = operand_def(FragmentType)
    a = operand_def(SmemTensorType)
    b = operand_def(SmemTensorType)
    assembly_format = "$acc `,` $a `,` $b attr-dict `:` type($acc) `,` type($a) `,` type($b)"

    def __init__(self, acc: SSAValue, a: SSAValue, b: SSAValue):
        super().__init__(operands=[acc, a, b])

    def verify_(self) -> None:
        """Check the product's shapes and the atom's operand types.

        Raises:
            CuteVerifyError: the operands are not matrices with equal contraction dims, the
                accumulator is not M x N, or a tensor-core atom gets operands other than its
                f16 / bf16.
        """
        m, n, _ = _matmul_dims(self, self.a, self.b)
        frag = self.acc.type
        assert isinstance(frag, FragmentType)
        if frag.get_shape() != (m, n):
            raise rule_error(self, f"accumulator {frag.get_shape()} does not match the product shape {(m, n)}")
        atom = frag.mma.atom_name
        ta, tb_ = smem_type(self.a).element_type, smem_type(self.b).element_type
        if atom != "UniversalFMA":
            want = "bf16" if "BF16" in atom else "f16"
            if str(ta) != want or str(tb_) != want:
                raise rule_error(self, f"atom {atom} needs {want} operands, got {ta} and {tb_}")


@irdl_op_definition
class MmaChainOp(CuteOp):
    """`acc += round(epilogue(A @ B)) @ C` and `sum += round(epilogue(A @ B))`, the product
    `P = A @ B` never leaving registers (FlashAttention-2's fused softmax numerator: scores,
    exp, row-sum partials and P @ V in one op).  `round` = to the element type of A (what a
    shared P tile would hold).

    A (M x K1), B (K1 x N1), C (N1 x D) are shared tiles; `sum` (M x N1) carries the tiled
    MMA of the first product, thr_layout (TGM, W) over the block's TGM x W warps: warp
    (wm, wn) takes the 16 rows of block wm and the atom blocks wn, wn + W, ... of P; `acc`
    (M x D) has thr_layout (TGM, 1): the W warps of a row block split the second product's
    K (= N1) and sum their slices when `acc` is stored (sliced K).  Rules: 16x8x16 atoms of
    one element type, one 16-row block per warp row (M <= 16 TGM), N1 a multiple of 16 W
    (two atom blocks per k16 step), the block has exactly TGM x W warps.

    With `online` (FlashAttention-2's loop body, Dao 2023, algorithm 1): `S = epilogue(A @ B)`
    in fp32, a running row max `m` (registers, -inf before the loop), `r = exp(m_old - m)`,
    `acc = r acc + round(exp(S - m)) @ C` and `sum`'s row totals `= r sum + rowsum(P)` (kept in
    its first column block; a row sum of `sum` after the loop is the softmax denominator).
    Needs W = 1: every warp owns all keys of its rows, 16 or 32 (two row blocks).

    An online chain may carry a causal mask (`mask_offset`, `mask_rows`, `mask_cols`: the
    `offset`, `row_origin`, `col_origin` of dialects/cute/mask_ops.py): S's element (i, j) is
    -inf unless `col0 + j <= row0 + i + offset`, applied after the epilogue, before the max."""

    name = "cute.mma_chain"
    acc = operand_def(FragmentType)
    sum = operand_def(FragmentType)
    a = operand_def(SmemTensorType)
    b = operand_def(SmemTensorType)
    c = operand_def(SmemTensorType)
    epilogue = prop_def(ArrayAttr)
    online = opt_prop_def(UnitAttr)
    mask_offset = opt_prop_def(IntegerAttr)
    mask_rows = opt_prop_def(DenseArrayBase)
    mask_cols = opt_prop_def(DenseArrayBase)
    assembly_format = (
        "$acc `,` $sum `,` $a `,` $b `,` $c $epilogue (`online` $online^)? attr-dict `:` type($acc) `,` type($sum) `,` "
        "type($a) `,` type($b) `,` type($c)"
    )

    def __init__(
        self,
        acc: SSAValue,
        sum: SSAValue,
        a: SSAValue,
        b: SSAValue,
        c: SSAValue,
        epilogue: Sequence[UnaryFnAttr],
        online: bool = False,
        mask: tuple[int, Sequence[int], Sequence[int]] | None = None,
    ):
        props: dict[str, Attribute] = {"epilogue": ArrayAttr(epilogue)}
        if online:
            props["online"] = UnitAttr()
        if mask is not None:
            m = mask_props(*mask)
            props.update({"mask_offset": m["offset"], "mask_rows": m["row_origin"], "mask_cols": m["col_origin"]})
        super().__init__(operands=[acc, sum, a, b, c], properties=props)

    @property
    def mask(self) -> tuple[int, tuple[int, ...], tuple[int, ...]] | None:
        """(offset, row origin, column origin) of the causal mask, or None."""
        if self.mask_offset is None or self.mask_rows is None or self.mask_cols is None:
            return None
        return self.mask_offset.value.data, dense_ints(self.mask_rows), dense_ints(self.mask_cols)

    def verify_(self) -> None:
        """Check the chain's shapes, types, atoms and warp layout.

        Raises:
            CuteVerifyError: a bad epilogue; A, B not matrices with equal K; C not an N1-row matrix;
                sum / acc not M x N1 / M x D; A, B, C not of one 16-bit type matching a 16x8x16 atom;
                mask properties incomplete, bad, or on a chain that is not online;
                acc's thr_layout not (tg_m, 1); M > 16 tg_m (32 tg_m online); N1 not a multiple of 16 x the key
                groups; an online chain with more than one key group; or an enclosing kernel
                without exactly tg_m x key-group warps.
        """
        check_epilogue(self, self.epilogue)
        given = [p is not None for p in (self.mask_offset, self.mask_rows, self.mask_cols)]
        if any(given) and not all(given):
            raise rule_error(self, "mask_offset, mask_rows and mask_cols go together")
        if self.mask is not None:
            if self.online is None:
                raise rule_error(self, "a causal mask needs an online chain (mx::mma_chain_online_run applies it)")
            check_mask(self, *self.mask)
        m, n1, _ = _matmul_dims(self, self.a, self.b)
        c_shape = smem_type(self.c).get_shape()
        if len(c_shape) < 2 or any(d != 1 for d in c_shape[:-2]) or c_shape[-2] != n1:
            raise rule_error(self, f"C {c_shape} must be a matrix with {n1} rows (the columns of A @ B)")
        d = c_shape[-1]
        acc, total = self.acc.type, self.sum.type
        assert isinstance(acc, FragmentType) and isinstance(total, FragmentType)
        if total.get_shape() != (m, n1) or acc.get_shape() != (m, d):
            raise rule_error(self, f"sum {total.get_shape()} / acc {acc.get_shape()} must be {(m, n1)} / {(m, d)}")
        types = {str(smem_type(v).element_type) for v in (self.a, self.b, self.c)}
        if len(types) != 1:
            raise rule_error(self, f"A, B and C must share one 16-bit element type, got {sorted(types)}")
        for frag in (acc, total):
            if frag.mma.atom_shape != (16, 8, 16):
                raise rule_error(self, f"{frag.mma.atom_name}: a 16x8x16 atom is needed")
            want = "bf16" if "BF16" in frag.mma.atom_name else "f16"
            if types != {want}:
                raise rule_error(self, f"atom {frag.mma.atom_name} needs {want} tiles")
        tgm, key_groups = total.mma.tg
        if self.online is not None and key_groups != 1:
            raise rule_error(self, f"an online chain needs one key group (thr_layout ({tgm}, 1)), got {key_groups}")
        if acc.mma.tg != (tgm, 1):
            raise rule_error(self, f"acc needs thr_layout ({tgm}, 1), the rows of sum's ({tgm}, {key_groups})")
        per_warp = 32 if self.online is not None else 16  # an online chain's warps take 1 or 2 row blocks
        if m > per_warp * tgm:
            raise rule_error(self, f"A has {m} rows; at most {per_warp} per warp row ({per_warp * tgm}) are supported")
        if n1 % (16 * key_groups):
            raise rule_error(
                self,
                f"N1 = {n1} must be a multiple of 16 x {key_groups} key groups (two atom blocks per warp and k16 step)",
            )
        kernel = self.parent_op()
        while kernel is not None and not isinstance(kernel, KernelOp):
            kernel = kernel.parent_op()
        if kernel is not None and kernel.num_threads != 32 * tgm * key_groups:
            raise rule_error(
                self,
                f"the block must have exactly {tgm * key_groups} warps (thr_layout of sum), has {kernel.num_threads} threads",
            )


@irdl_op_definition
class FragStoreOp(CuteOp):
    """Write an accumulator fragment into a tile: `out (=|+=) epilogue(acc)`."""

    name = "cute.frag_store"
    acc = operand_def(FragmentType)
    out = operand_def(SmemTensorType)
    epilogue = prop_def(ArrayAttr)
    mode = prop_def(StringAttr)
    assembly_format = "$acc $epilogue $mode $out attr-dict `:` type($acc) `->` type($out)"

    def __init__(self, acc: SSAValue, out: SSAValue, epilogue: Sequence[UnaryFnAttr], mode: str):
        super().__init__(
            operands=[acc, out], properties={"epilogue": ArrayAttr(epilogue), "mode": StringAttr(mode)}
        )

    def verify_(self) -> None:
        """Check the mode, epilogue and destination shape.

        Raises:
            CuteVerifyError: a bad or `rescale` mode, a bad epilogue, or a tile whose trailing two
                dims are not the fragment's (M, N) (leading dims must be 1).
        """
        check_mode(self, self.mode)
        if self.mode.data == "rescale":
            raise rule_error(self, "mode 'rescale' needs a scale tile; use store or add")
        check_epilogue(self, self.epilogue)
        frag = self.acc.type
        assert isinstance(frag, FragmentType)
        shape = smem_type(self.out).get_shape()
        if len(shape) < 2 or any(d != 1 for d in shape[:-2]) or tuple(shape[-2:]) != frag.get_shape():
            raise rule_error(self, f"tile {shape} does not hold a {frag.get_shape()} accumulator")
