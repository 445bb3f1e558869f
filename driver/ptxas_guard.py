"""Guard against a ptxas miscompile: values rematerialized from a reused `smem` register.

ptxas of CUDA 13.0 (V13.0.88, the toolkit of our H100 / H200 machines) can compute a shared
memory address from a PTX register that no longer holds what the address was derived from.
The PTX that NVVM emits is legal: a virtual register is first set to the dynamic shared
memory symbol (`mov.u32 %r427, smem;`), a value is derived from it (`add.s32 %r235, %r427,
4288;`, the base of one tile) and later the same register is reused -- as the induction
variable of a loop over another tile (`add.s32 %r427, %r427, 64;`) or as the address a
`select`-like branch picks (`add.s32 %r1538, %r679, 53152;`) -- while the derived value is
still read.  In the SASS, ptxas drops %r235 and recomputes it inside the loop as
`R38 + 0x10c0` from the register that now holds the loop's pointer, so every later access to
that tile drifts (seen with nvdisasm of `nvcc -O3 -arch=sm_90`; the GPU faults with
cudaErrorIllegalAddress, compute-sanitizer names exactly that load, or reads wrong numbers
when the drift stays inside the allocation).  `-Xptxas -O0` compiles the same PTX correctly
(graph 423 on an H200, 2026-11-28).  Found by the Tensor Comprehensions fuzz family (seeds 8
and 9, graphs 423, 456 and 625: an fp32 FMA matmul, and elementwise passes after an MMA with a
row tail).

`smem_register_reuse` finds the pattern in a PTX module: a register set to a `.shared`
symbol's address and set again later in its function, while a value derived from it before
is read after that (in text order, or anywhere in a loop around the second definition).  The
three graphs have it; none of the 79 example / suite and 219 saved-muGraph programs does, nor
the GEMM and attention fuzz families' sample translation units, whose registers are reused
without a derived value living on.  The rule is conservative: ptxas recomputes the derived
value from the reused register only at times (its register pressure decides), and 5 more of
27 sampled mixed / tc fuzz translation units have the pattern but ran right.  `compile_cuda`
(driver/nvcc.py) assembles a module that has it with ptxas at -O0 and warns
(`PtxasGuardWarning`): slower code, right numbers.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

_ENTRY = re.compile(r"^\.(?:visible\s+)?\.entry\s+(\w+)")
_SHARED_SYMBOL = re.compile(r"\.shared\s+(?:\.align\s+\d+\s+)?\.\w+\s+(\w+)")
_SYMBOL_ADDRESS = re.compile(r"^\s*mov\.u(?:32|64)\s+(%rd?\d+),\s*(\w+)\s*;")
_INSTRUCTION = re.compile(r"^\s*(?:@!?%p\d+\s+)?([a-z][\w.]*)\s+(.*);")
_REGISTER = re.compile(r"%rd?\d+")
_LABEL = re.compile(r"^(\$L__\w+):")
_BRANCH = re.compile(r"\bbra(?:\.uni)?\s+(\$L__\w+)\s*;")
_NO_RESULT = ("st.", "bra", "ret", "bar.", "red.", "cp.async", "prefetch", "fence", "membar")
"""Instructions that write no register: a first operand is read (a store's address)."""

SAFE_PTXAS_OPTIONS: tuple[str, ...] = ("-Xptxas", "-O0")
"""The nvcc options that compile a guarded module (ptxas without its optimizer)."""

PTXAS_GUARD = "ptxas-guard-2"
"""Part of the cubin cache key: cubins compiled before the guard (or by another version of it)
are not reused."""


class PtxasGuardWarning(UserWarning):
    """A module was assembled with `SAFE_PTXAS_OPTIONS`: right numbers, slower kernels."""


@dataclass(frozen=True)
class SmemRegisterReuse:
    """One hit: in kernel `kernel`, `register` is set to a shared symbol's address at PTX line
    `line` (1-based), set again at line `redefined`, and `derived` (computed from it before)
    is read at line `read`."""

    kernel: str
    register: str
    line: int
    redefined: int
    derived: str
    read: int


@dataclass(frozen=True)
class _Instruction:
    line: int
    result: str | None
    operands: tuple[str, ...]


def _parse(lines: Sequence[str], start: int, end: int) -> dict[int, _Instruction]:
    """The instructions of lines [start, end) by line index: the register written (the first
    operand when it is one register; None for stores, branches, predicates, vectors, ...) and
    the registers read."""
    parsed: dict[int, _Instruction] = {}
    for k in range(start, end):
        m = _INSTRUCTION.match(lines[k])
        if not m:
            continue
        first, _, rest = m.group(2).partition(",")
        first = first.strip()
        writes = _REGISTER.fullmatch(first) is not None and not m.group(1).startswith(_NO_RESULT)
        reads = _REGISTER.findall(rest) + ([] if writes else _REGISTER.findall(first))
        parsed[k] = _Instruction(k, first if writes else None, tuple(reads))
    return parsed


def _loops(lines: Sequence[str], start: int, end: int) -> list[tuple[int, int]]:
    """(label line, backward branch line) of every loop in lines [start, end)."""
    labels = {m.group(1): k for k in range(start, end) if (m := _LABEL.match(lines[k]))}
    loops = []
    for k in range(start, end):
        m = _BRANCH.search(lines[k])
        if m and labels.get(m.group(1), end) < k:
            loops.append((labels[m.group(1)], k))
    return loops


def _function_hits(lines: Sequence[str], start: int, end: int, kernel: str, shared: set[str]) -> list[SmemRegisterReuse]:
    parsed = _parse(lines, start, end)
    loops = _loops(lines, start, end)
    hits = []
    for k in range(start, end):
        found = _SYMBOL_ADDRESS.match(lines[k])
        if not found or found.group(2) not in shared:
            continue
        register = found.group(1)
        again = next((q for q in range(k + 1, end) if q in parsed and parsed[q].result == register), None)
        if again is None:
            continue
        # values computed from the register before it is set again (one step: what ptxas recomputes)
        derived = {
            result
            for q in range(k + 1, again)
            if q in parsed and register in parsed[q].operands and (result := parsed[q].result) not in (None, register)
        }
        around = [range(a, b + 1) for a, b in loops if a <= again <= b]
        later = [q for r in [range(again + 1, end), *around] for q in r]
        read = next((q for q in later if q in parsed and derived & set(parsed[q].operands)), None)
        if read is not None:
            value = min(derived & set(parsed[read].operands))
            hits.append(SmemRegisterReuse(kernel, register, k + 1, again + 1, value, read + 1))
    return hits


def smem_register_reuse(ptx: str) -> list[SmemRegisterReuse]:
    """The register reuses of `ptx` that ptxas 13.0 miscompiles (module docstring), at most one
    per register set to a shared symbol's address.  PTX registers are per function; a function
    ends at a line `}`.

    Raises:
        Nothing: text that is not PTX has no hits."""
    lines = ptx.splitlines()
    shared = set(_SHARED_SYMBOL.findall(ptx))  # `smem`, the sm_90a kernels' `smem_raw` (mangled), ...
    hits: list[SmemRegisterReuse] = []
    k = 0
    while k < len(lines):
        entry = _ENTRY.match(lines[k])
        if not entry:
            k += 1
            continue
        end = next((q for q in range(k, len(lines)) if lines[q].startswith("}")), len(lines))
        hits += _function_hits(lines, k, end, entry.group(1), shared)
        k = end
    return hits
