"""C++ spelling for the CUDA printer: element types, literals, identifiers, `mx::L<...>`
layouts, copy orders and fragment load modes, and the printer's error (`CudaEmitError`).

Pure functions of types and shapes: they read no decision from the IR.  Layout modes are
listed fastest first, as the header library (`codegen/include/mirage_xdsl/layout.cuh`) wants.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import NoReturn

from xdsl.dialects.builtin import BFloat16Type, Float16Type, Float32Type, Float64Type, IntegerType, Signedness
from xdsl.ir import Attribute, Operation
from xdsl.utils.exceptions import DiagnosticException

from mirage_xdsl.dialects import cute


class CudaEmitError(DiagnosticException):
    """The module cannot be printed as CUDA; the message names the op and the reason."""


def printer_error(op: Operation, msg: str) -> CudaEmitError:
    """The `CudaEmitError` (not raised) for `op`: `cuda target: <op name>: <msg>`."""
    return CudaEmitError(f"cuda target: {op.name}: {msg}")


def missing_decision(op: Operation, attr: str, pass_name: str) -> NoReturn:
    """Raise a located error: `op` lacks the decision `attr` that the cute pass `pass_name`
    writes (the printer never makes these decisions itself).

    Raises:
        CudaEmitError: always."""
    msg = f"cuda target: {op.name}: no '{attr}' attribute; run {pass_name} first (mirage-transpile runs it)"
    op.emit_error(msg, CudaEmitError(msg))


def c_type(elem: Attribute) -> str:
    """The C++ type of a kernel element type (`mx::f16`, `mx::bf16`, `float`, `double`).

    Raises:
        ValueError: another element type.
    """
    if isinstance(elem, Float16Type):
        return "mx::f16"
    if isinstance(elem, BFloat16Type):
        return "mx::bf16"
    if isinstance(elem, Float32Type):
        return "float"
    if isinstance(elem, Float64Type):
        return "double"
    raise ValueError(f"no CUDA type for element type {elem}")


def dtype_name(elem: Attribute) -> str:
    """numpy spelling of a builtin element type (LaunchPlan `DTypeName`)."""
    if isinstance(elem, Float16Type):
        return "float16"
    if isinstance(elem, BFloat16Type):
        return "bfloat16"
    if isinstance(elem, Float32Type):
        return "float32"
    if isinstance(elem, Float64Type):
        return "float64"
    if isinstance(elem, IntegerType):
        if elem.width.data == 8 and elem.signedness.data != Signedness.UNSIGNED:
            return "int8"
        if elem.width.data == 16 and elem.signedness.data == Signedness.UNSIGNED:
            return "uint16"
    raise ValueError(f"no dtype name for element type {elem}")


def c_float(value: float) -> str:
    """An fp32 C++ literal."""
    if math.isinf(value):
        return "mx::neg_inf()" if value < 0 else "(-mx::neg_inf())"
    if math.isnan(value):
        return "__int_as_float(0x7fc00000)"
    text = repr(float(value))
    return f"{text}f"


def c_ident(name: str) -> str:
    """`name` as a C identifier: other characters become `_`, a leading digit gets `k_`."""
    ident = re.sub(r"[^A-Za-z0-9_]", "_", name)
    return ident if ident and not ident[0].isdigit() else f"k_{ident}"


def layout_t(dims: Sequence[int], strides: Sequence[int], swizzle: cute.SwizzleAttr | None = None) -> str:
    """`mx::L<...>` for modes (fastest first); size-1 modes are dropped, at most 4 remain."""
    modes = [(d, s) for d, s in zip(dims, strides) if d != 1]
    if len(modes) > 4:
        raise ValueError(f"more than 4 non-trivial modes: {modes}")
    modes += [(1, 0)] * (4 - len(modes))
    args = [str(d) for d, _ in modes] + [str(s) for _, s in modes]
    if swizzle is not None and swizzle.is_xor:
        args += [str(v) for v in swizzle.bms]
    return "mx::L<" + ",".join(args) + ">"


def matrix_t(sr: int, sc: int, swizzle: cute.SwizzleAttr | None = None) -> str:
    """`mx::M2<sr, sc[, B, M, S]>`: a 2-D shared matrix with row stride `sr` and column stride
    `sc` (elements), swizzled when `swizzle` is an xor swizzle."""
    args = [str(sr), str(sc)]
    if swizzle is not None and swizzle.is_xor:
        args += [str(v) for v in swizzle.bms]
    return "mx::M2<" + ",".join(args) + ">"


def copy_order(dims: Sequence[int], gstrides: Sequence[int]) -> list[int]:
    """Copy modes fastest first: the DTensor's unit-stride dim, then by increasing stride."""
    rank = len(dims)
    inner = [d for d in range(rank) if gstrides[d] == 1 and dims[d] > 1]
    first = inner[0] if inner else rank - 1
    rest = sorted((d for d in range(rank) if d != first), key=lambda d: (gstrides[d], -d))
    return [first, *rest]


def smem_vec_ok(typ: cute.SmemTensorType, dim: int, vec: int) -> bool:
    """Whether `vec`-element vectors along `dim` of a shared tile are contiguous and aligned:
    unit stride along `dim`, every other stride a multiple of `vec`, and an xor swizzle that
    leaves runs of at least `vec` elements."""
    strides = typ.strides
    if strides[dim] != 1:
        return False
    if any(strides[d] % vec for d in range(len(strides)) if d != dim and typ.get_shape()[d] > 1):
        return False
    if typ.swizzle.is_xor and (1 << typ.swizzle.bms[1]) < vec:
        return False
    return True


def pair_ok(typ: cute.SmemTensorType, k_dim: int, other_dim: int) -> bool:
    """(k, k+1) pairs of a 2-byte matrix operand are aligned 32-bit words."""
    strides, dims = typ.strides, typ.get_shape()
    if strides[k_dim] != 1 or cute.elem_bytes(typ.element_type) != 2:
        return False
    if dims[other_dim] > 1 and strides[other_dim] % 2:
        return False
    if typ.swizzle.is_xor and typ.swizzle.bms[1] < 1:
        return False
    return True


LOAD_MODES = ("kLdElem", "kLdPair", "kLdsm", "kLdsmT")


def fragment_load_mode(typ: cute.SmemTensorType, mn_dim: int, k_dim: int, atom_k: int) -> int:
    """How mma_run reads an MMA operand tile (index into LOAD_MODES).

    ldmatrix needs 16-byte rows: 2-byte elements, 8 contiguous elements along the row dim
    (stride 1), the other stride a multiple of 8 elements and a swizzle that keeps 8-element
    chunks whole (M >= 3).  Rows along k (`kLdsm`) also need K % 8 == 0 (a partial chunk
    would feed garbage into every output); rows along m/n (`kLdsmT`) may run into the row
    padding, which only reaches dropped outputs."""
    strides, dims = typ.strides, typ.get_shape()
    two_bytes = cute.elem_bytes(typ.element_type) == 2
    chunks_whole = not typ.swizzle.is_xor or typ.swizzle.bms[1] >= 3
    if atom_k == 16 and two_bytes and chunks_whole:
        if strides[k_dim] == 1 and (dims[mn_dim] == 1 or strides[mn_dim] % 8 == 0) and dims[k_dim] % 8 == 0:
            return 2
        if strides[mn_dim] == 1 and dims[mn_dim] > 1 and (dims[k_dim] == 1 or strides[k_dim] % 8 == 0):
            return 3
    return 1 if pair_ok(typ, k_dim, mn_dim) else 0
