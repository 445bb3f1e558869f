"""Guard against a ptxas miscompile: values rematerialized from a reused `smem` register.

ptxas of CUDA 13.0 (V13.0.88, the toolkit of our H100 / H200 machines) can compute a shared
memory address from a PTX register that no longer holds what the address was derived from.
The PTX that NVVM emits is legal: a virtual register is first set to the dynamic shared
memory symbol (`mov.u32 %r427, smem;`), a value is derived from it (`add.s32 %r235, %r427,
4288;`, the base of one tile) and later the same register is reused -- as the induction
variable of a loop over another tile (`add.s32 %r427, %r427, 64;`) or as the address a
`select`-like branch picks (`add.s32 %r1538, %r679, 53152;`).  In the SASS, ptxas drops
%r235 and recomputes it inside the loop as `R38 + 0x10c0` from the register that now holds
the loop's pointer, so every later access to that tile drifts (seen with nvdisasm of
`nvcc -O3 -arch=sm_90`; the GPU faults with cudaErrorIllegalAddress, compute-sanitizer
names exactly that load, or reads wrong numbers when the drift stays inside the
allocation).  `-Xptxas -O0` compiles the same PTX correctly (graph 423 on an H200; 2026-11-28).  Found by
the Tensor Comprehensions fuzz family (seeds 8 / 9, graphs 423, 456 and 625: an fp32 FMA
matmul and an elementwise pass after an MMA with a row tail); none of the 79 example and
suite programs has the pattern.

`smem_register_reuse` finds the pattern in a PTX module; `compile_cuda` (driver/nvcc.py)
compiles a module that has it with ptxas at -O0: slower code, right numbers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_ENTRY = re.compile(r"^\.(?:visible\s+)?\.entry\s+(\w+)")
_SHARED_SYMBOL = re.compile(r"\.shared\s+(?:\.align\s+\d+\s+)?\.\w+\s+(\w+)")
_SYMBOL_ADDRESS = re.compile(r"^\s*mov\.u(?:32|64)\s+(%rd?\d+),\s*(\w+)\s*;")
_DEFINITION = re.compile(r"^\s*[a-z][\w.]*\s+(%rd?\d+)\s*,")

SAFE_PTXAS_OPTIONS: tuple[str, ...] = ("-Xptxas", "-O0")
"""The nvcc options that compile a guarded module (ptxas without its optimizer)."""

PTXAS_GUARD = "ptxas-guard-1"
"""Part of the cubin cache key: cubins compiled before the guard (or by another version of it)
are not reused."""


class PtxasGuardWarning(UserWarning):
    """A module was assembled with `SAFE_PTXAS_OPTIONS`: right numbers, slower kernels."""


@dataclass(frozen=True)
class SmemRegisterReuse:
    """One hit: in kernel `kernel`, `register` is set to `smem` at PTX line `line` (1-based)
    and set again at line `redefined` (`instruction`)."""

    kernel: str
    register: str
    line: int
    redefined: int
    instruction: str


def smem_register_reuse(ptx: str) -> list[SmemRegisterReuse]:
    """Registers of `ptx` that hold the address of a shared-memory symbol (`smem`, any
    `.shared` variable the module declares) and are set again later in the same function
    (PTX registers are per function; a function ends at a line `}`).

    Raises:
        Nothing: text that is not PTX has no hits."""
    lines = ptx.splitlines()
    shared = set(_SHARED_SYMBOL.findall(ptx))  # `smem`, the sm_90a kernels' `smem_raw` (mangled), ...
    hits: list[SmemRegisterReuse] = []
    kernel = ""
    for i, line in enumerate(lines):
        entry = _ENTRY.match(line)
        if entry:
            kernel = entry.group(1)
        found = _SYMBOL_ADDRESS.match(line)
        if not found or found.group(2) not in shared:
            continue
        register = found.group(1)
        for j in range(i + 1, len(lines)):
            if lines[j].startswith("}"):
                break
            again = _DEFINITION.match(lines[j])
            if again and again.group(1) == register:
                hits.append(SmemRegisterReuse(kernel, register, i + 1, j + 1, lines[j].strip()))
                break
    return hits
