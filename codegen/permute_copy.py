"""CUDA for `cute.permute_copy`: a transposing (or straight) copy kernel and its launch.

The op's decisions (`tile`, `vec`, dialects/cute/permute_copy.py) are printed as they are.
Sizes and strides are compile-time constants.  Result axis j is operand axis perm[j];
`si[j]` is that axis's operand stride, `so[j]` the result's (both row-major, elements).

tile = 64 (the innermost axis moves), 256 threads, 64 x 66 elements of dynamic shared memory:

    extern "C" __global__ void __launch_bounds__(256) g_permute_0(
        unsigned short* __restrict__ out, const unsigned short* __restrict__ in) {
      // block -> (p tile, q tile, the other axes); p = the operand's innermost axis, q = the result's
      // load: tile[q][p] = in[... + p + q * si[q]]    (lanes along p: coalesced reads)
      // store: out[... + q + p * so[p]] = tile[q][p]  (lanes along q: coalesced writes)
    }

tile = 0: each of 256 threads per block copies `vec` consecutive elements (uint4 when 8).
The 66-element row pitch puts the 32 lanes of a column read in 32 different banks.  Both
forms use only what the host emulator provides (dynamic `smem`, `__syncthreads`).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from xdsl.dialects.builtin import TensorType
from xdsl.ir import Operation, SSAValue

from mirage_xdsl.codegen.launch_plan import KernelLaunch, TensorRef
from mirage_xdsl.dialects.cute.permute_copy import TRANSPOSE_TILE, PermuteCopyOp

THREADS = 256
PITCH = TRANSPOSE_TILE + 2
"""Row pitch of the shared tile in elements (module docstring)."""
_WORDS = {2: "unsigned short", 4: "unsigned int", 8: "unsigned long long", 1: "unsigned char"}


def _elem_bytes(value: SSAValue) -> int:
    tensor = value.type
    assert isinstance(tensor, TensorType)
    width = getattr(tensor.element_type, "bitwidth", None)
    if not isinstance(width, int) or width // 8 not in _WORDS:
        raise ValueError(f"cute.permute_copy: element type {tensor.element_type} has no copy word")
    return width // 8


def _rows(shape: list[int]) -> list[int]:
    return [math.prod(shape[i + 1 :]) for i in range(len(shape))]


def _geometry(op: PermuteCopyOp) -> tuple[list[int], list[int], list[int]]:
    """(result shape, operand stride per result axis, result stride per result axis)."""
    src = op.input.type
    assert isinstance(src, TensorType)
    shape, perm = list(src.get_shape()), op.perm()
    ins = _rows(shape)
    out_shape = [shape[p] for p in perm]
    return out_shape, [ins[p] for p in perm], _rows(out_shape)


def _grid(op: PermuteCopyOp) -> int:
    out_shape, _, _ = _geometry(op)
    if op.tile.value.data:
        p, q = _inner_axis(op), len(out_shape) - 1
        tiles = math.ceil(out_shape[p] / TRANSPOSE_TILE) * math.ceil(out_shape[q] / TRANSPOSE_TILE)
        return tiles * math.prod(s for j, s in enumerate(out_shape) if j not in (p, q))
    return math.ceil(math.prod(out_shape) // op.vec.value.data / THREADS)



def _inner_axis(op: PermuteCopyOp) -> int:
    """The result axis that is the operand's innermost axis."""
    return op.perm().index(len(op.perm()) - 1)


def smem_bytes(op: PermuteCopyOp) -> int:
    """Dynamic shared memory of the kernel: the 64 x 66 tile (tile = 64), else 0."""
    return TRANSPOSE_TILE * PITCH * _elem_bytes(op.input) if op.tile.value.data else 0


def print_permute_copy(op: PermuteCopyOp) -> str:
    """The kernel's CUDA source (module docstring).

    Raises:
        ValueError: an element type of no 1/2/4/8-byte width.
    """
    word = _WORDS[_elem_bytes(op.input)]
    out_shape, si, so = _geometry(op)
    r = len(out_shape)
    name = op.kernel_name.data
    lines = [
        f'extern "C" __global__ void __launch_bounds__({THREADS}) {name}(',
        f"    {word}* __restrict__ out, const {word}* __restrict__ in) {{",
    ]
    if op.tile.value.data:
        p, q = _inner_axis(op), r - 1
        t = TRANSPOSE_TILE
        tp, tq = math.ceil(out_shape[p] / t), math.ceil(out_shape[q] / t)
        lines += [
            "  extern __shared__ __align__(128) unsigned char smem[];",
            f"  {word}* tile = reinterpret_cast<{word}*>(smem);  // [{t}][{PITCH}]: tile[q][p]",
            "  unsigned long long rest = blockIdx.x;",
            f"  const int p0 = (int)(rest % {tp}) * {t};",
            f"  rest /= {tp};",
            f"  const int q0 = (int)(rest % {tq}) * {t};",
            f"  rest /= {tq};",
            "  long long ib = 0, ob = 0;",
        ]
        for j in reversed([j for j in range(r) if j not in (p, q)]):
            lines += [
                f"  {{ const long long i = (long long)(rest % {out_shape[j]}ULL); rest /= {out_shape[j]}ULL; "
                f"ib += i * {si[j]}LL; ob += i * {so[j]}LL; }}"
            ]
        lines += [
            "  const int tx = threadIdx.x % 32, ty = threadIdx.x / 32;",
            f"  for (int y = ty; y < {t}; y += {THREADS // 32}) {{",
            f"    for (int x = tx; x < {t}; x += 32) {{",
            "      const int p = p0 + x, q = q0 + y;",
            f"      if (p < {out_shape[p]} && q < {out_shape[q]}) tile[y * {PITCH} + x] = in[ib + p + (long long)q * {si[q]}LL];",
            "    }",
            "  }",
            "  __syncthreads();",
            f"  for (int y = ty; y < {t}; y += {THREADS // 32}) {{",
            f"    for (int x = tx; x < {t}; x += 32) {{",
            "      const int q = q0 + x, p = p0 + y;",
            f"      if (p < {out_shape[p]} && q < {out_shape[q]}) out[ob + q + (long long)p * {so[p]}LL] = tile[x * {PITCH} + y];",
            "    }",
            "  }",
            "}",
            "",
        ]
        return "\n".join(lines)
    vec = op.vec.value.data
    chunks = out_shape[-1] // vec
    total = math.prod(out_shape) // vec
    lines += [
        f"  const long long v = (long long)blockIdx.x * {THREADS} + threadIdx.x;",
        f"  if (v >= {total}LL) return;",
        f"  unsigned long long rest = (unsigned long long)v / {chunks}ULL;",
        f"  long long ib = (v % {chunks}LL) * {vec}, ob = ib;",
    ]
    for j in reversed(range(r - 1)):
        lines += [
            f"  {{ const long long i = (long long)(rest % {out_shape[j]}ULL); rest /= {out_shape[j]}ULL; "
            f"ib += i * {si[j]}LL; ob += i * {so[j]}LL; }}"
        ]
    if vec == 8 and word == "unsigned short":
        lines.append("  *reinterpret_cast<uint4*>(out + ob) = *reinterpret_cast<const uint4*>(in + ib);")
    else:
        lines.append(f"  for (int e = 0; e < {vec}; ++e) out[ob + e] = in[ib + e];")
    lines += ["}", ""]
    return "\n".join(lines)


def permute_launch(op: PermuteCopyOp, ref: Callable[[SSAValue, Operation], TensorRef]) -> KernelLaunch:
    """The `KernelLaunch` of `op`: (result, operand) pointers, the grid of `_grid`, 256 threads.

    Raises:
        ValueError: an element type of no 1/2/4/8-byte width.
    """
    return KernelLaunch(
        op.kernel_name.data,
        (_grid(op), 1, 1),
        (THREADS, 1, 1),
        smem_bytes(op),
        (ref(op.result, op), ref(op.input, op)),
        pdl=False,
    )
