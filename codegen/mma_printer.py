"""Printing the tensor-core ops: `cute.mma_init`, `cute.mma`, `cute.mma_chain`, `cute.frag_store`.

Each becomes one call into `codegen/include/mirage_xdsl/mma.cuh` (mma.sync m16n8k16) with
the fragment's shape, the operands' shared-memory layouts and load modes, and the sliced-K
scratch that cute-slice-mma planned; squared-row sums that ride on an MMA
(`square_sum_mma.py`) are declared here too.
"""

from __future__ import annotations

from mirage_xdsl.codegen.cuda_syntax import LOAD_MODES, fragment_load_mode, matrix_t
from mirage_xdsl.codegen.printer_base import KernelPrinterBase
from mirage_xdsl.codegen.square_sum_mma import SquareSum
from mirage_xdsl.dialects import cute


def _online_sum(user: object, frag: object) -> bool:
    """Whether `user` is an online `cute.mma_chain` whose row-sum fragment is `frag`."""
    return isinstance(user, cute.MmaChainOp) and user.online is not None and user.sum is frag


class MmaPrinter(KernelPrinterBase):
    """The tensor-core part of the kernel printer (a mixin of `cuda_printer._KernelPrinter`)."""

    @staticmethod
    def frag_info(frag: cute.FragmentType) -> tuple[int, int, str, int, int, int, bool]:
        """(M, N, atom name, warp rows tg_m, warp cols tg_n, atom K, bf16?) of an MMA fragment."""
        m, n = frag.get_shape()
        mma = frag.mma
        atom = mma.atom_name
        tgm, tgn = mma.tg
        ak = mma.atom_shape[2]
        return m, n, atom, tgm, tgn, ak, "BF16" in atom

    def mma_init(self, op: cute.MmaInitOp) -> None:
        """Declare the register accumulator of `op` (`mx::MmaAcc`, sliced K when cute-slice-mma
        sliced it, or `mx::FmaAcc` for UniversalFMA) and zero it."""
        frag = op.result.type
        assert isinstance(frag, cute.FragmentType)
        m, n, atom, tgm, tgn, ak, _ = self.frag_info(frag)
        name = f"f{self.frag_count}"
        self.frag_count += 1
        self.names[op.result] = name
        if atom == "UniversalFMA":
            self.emit(f"mx::FmaAcc<{m}, {n}, {self.nt}> {name};  // {atom}")
        else:
            ks = self.slicing.slices.get(op.result, 1)
            sliced = f", {ks}" if ks > 1 else ""
            note = f", K sliced over {ks} warp groups" if ks > 1 else ""
            self.emit(f"mx::MmaAcc<{m}, {n}, {tgm}, {tgn}, {ak}{sliced}> {name};  // {atom}, thr_layout ({tgm},{tgn}){note}")
        self.emit(f"{name}.zero();")
        if any(_online_sum(u.operation, op.result) for u in op.result.uses):
            # the running row max of an online chain: rows g and g + 8 of each lane's warp row
            blocks = -(-m // (16 * tgm))  # m16 row blocks per warp
            self.emit(f"float {name}_max[{2 * blocks}];  // running row max (online softmax): rows g, g + 8 per row block")
            self.emit(f"for (int r = 0; r < {2 * blocks}; ++r) {name}_max[r] = mx::neg_inf();")

    def mma(self, op: cute.MmaOp) -> None:
        """One tiled MMA step `acc += A @ B` over the shared tiles (`mx::mma_run` / `mx::fma_run`)."""
        frag = op.acc.type
        assert isinstance(frag, cute.FragmentType)
        m, n, atom, tgm, tgn, ak, bf = self.frag_info(frag)
        ta, tbt = op.a.type, op.b.type
        assert isinstance(ta, cute.SmemTensorType) and isinstance(tbt, cute.SmemTensorType)
        ra, rb = len(ta.get_shape()), len(tbt.get_shape())
        k = ta.get_shape()[-1]
        acc = self.names[op.acc]
        a, b = self.tile_ptr(op.a), self.tile_ptr(op.b)
        sa_m, sa_k = ta.strides[-2], ta.strides[-1]
        sb_k, sb_n = tbt.strides[-2], tbt.strides[-1]
        if atom == "UniversalFMA":
            la = matrix_t(sa_m, sa_k, ta.swizzle)
            lb = matrix_t(sb_k, sb_n, tbt.swizzle)
            self.emit(f"mx::fma_run<{self.nt}, decltype({acc}), {m}, {n}, {k}, {la}, {lb}>({acc}, {a}, {b}, tid);")
            return
        la = matrix_t(sa_m, sa_k, ta.swizzle)
        lb = matrix_t(sb_n, sb_k, tbt.swizzle)  # B^T view: (n, k)
        am = fragment_load_mode(ta, ra - 2, ra - 1, ak)
        bm = fragment_load_mode(tbt, rb - 1, rb - 2, ak)
        self.emit(
            f"mx::mma_run<{self.nt}, decltype({acc}), {m}, {n}, {k}, {tgm}, {tgn}, {ak}, {str(bf).lower()}, "
            f"{la}, {lb}, mx::{LOAD_MODES[am]}, mx::{LOAD_MODES[bm]}>({acc}, {a}, {b}, smem, tid);  // {atom}"
        )

    def mma_chain(self, op: cute.MmaChainOp) -> None:
        """`P = epilogue(A @ B)` kept in registers, then `acc += P @ C` and `sum += P`
        (`mx::mma_chain_run`); with `online`, the running max and rescaled sums of
        `mx::mma_chain_online_run`, whose row max the sum's `mma_init` declares."""
        acc, total = op.acc.type, op.sum.type
        assert isinstance(acc, cute.FragmentType) and isinstance(total, cute.FragmentType)
        m, n1, atom, tgm, warps, _, bf = self.frag_info(total)
        ta, tbt, tc = op.a.type, op.b.type, op.c.type
        assert isinstance(ta, cute.SmemTensorType) and isinstance(tbt, cute.SmemTensorType)
        assert isinstance(tc, cute.SmemTensorType)
        k1, d = ta.get_shape()[-1], tc.get_shape()[-1]
        ra, rb, rc = len(ta.get_shape()), len(tbt.get_shape()), len(tc.get_shape())
        la = matrix_t(ta.strides[-2], ta.strides[-1], ta.swizzle)
        lb = matrix_t(tbt.strides[-1], tbt.strides[-2], tbt.swizzle)  # B^T view: (n, k)
        lc = matrix_t(tc.strides[-1], tc.strides[-2], tc.swizzle)  # C^T view: (d, key)
        am = LOAD_MODES[fragment_load_mode(ta, ra - 2, ra - 1, 16)]
        bm = LOAD_MODES[fragment_load_mode(tbt, rb - 1, rb - 2, 16)]
        cm = LOAD_MODES[fragment_load_mode(tc, rc - 1, rc - 2, 16)]
        cm = cm if cm == "kLdsmT" else "kLdElem"  # mma_chain_run reads C by ldmatrix.trans or elements
        value = self.apply_epilogue("v", op.epilogue)
        acc_name, sum_name = self.names[op.acc], self.names[op.sum]
        if op.online is not None:
            call = (
                f"mx::mma_chain_online_run<{self.nt}, decltype({acc_name}), decltype({sum_name}), {m}, {n1}, {k1}, {d}, "
                f"{tgm}, {str(bf).lower()}, {la}, {lb}, mx::{am}, mx::{bm}, {lc}, mx::{cm}>({acc_name}, {sum_name}, "
                f"{sum_name}_max, {self.tile_ptr(op.a)}, {self.tile_ptr(op.b)}, {self.tile_ptr(op.c)}, smem, tid,"
            )
            mask = op.mask
            unmasked = self.unmasked.get(op)
            if mask is None or unmasked is not None:
                if unmasked is not None:
                    self.emit(f"if (it < {unmasked}) {{  // a key tile fully below the diagonal: no mask")
                    self.indent += 1
                self.emit(call)
                self.emit(f"    [](float v) {{ return {value}; }});  // {atom}: online softmax, S and P stay in registers")
                if mask is None:
                    return
                self.indent -= 1
                self.emit("} else {  // a key tile on the diagonal")
                self.indent += 1
            offset, rows, cols = mask
            diag = f"{self.mask_origin(rows)} + {offset} - ({self.mask_origin(cols)})"
            self.emit(call)
            self.emit(f"    [](float v) {{ return {value}; }},  // {atom}: online softmax, S and P stay in registers")
            self.emit(f"    mx::CausalMask{{{diag}}});  // causal mask: key column <= query row + offset")
            if unmasked is not None:
                self.indent -= 1
                self.emit("}")
            return
        self.emit(
            f"mx::mma_chain_run<{self.nt}, decltype({acc_name}), decltype({sum_name}), {m}, {n1}, {k1}, {d}, {tgm}, {warps}, "
            f"{str(bf).lower()}, {la}, {lb}, mx::{am}, mx::{bm}, {lc}, mx::{cm}>({acc_name}, {sum_name}, "
            f"{self.tile_ptr(op.a)}, {self.tile_ptr(op.b)}, {self.tile_ptr(op.c)}, smem, tid,"
        )
        self.emit(f"    [](float v) {{ return {value}; }});  // {atom}: P = epilogue(A @ B) stays in registers")

    def frag_store(self, op: cute.FragStoreOp) -> None:
        """Store (or add / max into) a shared tile the accumulator after its epilogue
        (`mx::mma_store` / `mx::fma_store`)."""
        frag = op.acc.type
        out = op.out.type
        assert isinstance(frag, cute.FragmentType) and isinstance(out, cute.SmemTensorType)
        m, n, atom, tgm, tgn, _, _ = self.frag_info(frag)
        value = self.apply_epilogue("v", op.epilogue)
        body, read = self.store_expr(op.mode.data, value)
        lc = matrix_t(out.strides[-2], out.strides[-1], out.swizzle)
        acc = self.names[op.acc]
        dst = self.tile_ptr(op.out)
        if atom == "UniversalFMA":
            self.emit(f"mx::fma_store<{self.nt}, decltype({acc}), {m}, {n}, {lc}, {str(read).lower()}>({acc}, {dst}, tid,")
        else:
            off = self.slicing.offsets.get(op.acc)
            scratch = "static_cast<float*>(nullptr)" if off is None else f"reinterpret_cast<float*>(smem + {off})"
            self.emit(
                f"mx::mma_store<decltype({acc}), {m}, {n}, {tgm}, {tgn}, {lc}, {str(read).lower()}>({acc}, {dst}, "
                f"{scratch}, tid,"
            )
        self.emit(f"    [](float o, float v) {{ return {body}; }});")

    def square_sum_decl(self, square: SquareSum, reg: str) -> None:
        """Declare and zero the tensor-core sum of squares that rides on register tile `reg`
        (square_sum_mma.py)."""
        frag, ta = square.mma.acc.type, square.mma.a.type
        assert isinstance(frag, cute.FragmentType) and isinstance(ta, cute.SmemTensorType)
        bf16 = str("BF16" in frag.mma.atom_name).lower()
        la = matrix_t(ta.strides[-2], ta.strides[-1], ta.swizzle)
        k = ta.get_shape()[-1]
        self.emit(f"mx::SquareSumMma<{self.nt}, {k}, {bf16}, {la}> {reg}_sq;  // {reg}'s sum of squares on the tensor cores")
        self.emit(f"{reg}_sq.zero();")
