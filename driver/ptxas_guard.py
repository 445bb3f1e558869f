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
(computed once, outside any loop around the second definition) is read after that (in text
order, or anywhere in a loop around the second definition).  The three graphs have it, and so
does the per-kernel decoder layer of the megakernel benchmark (`bench/megakernel.py`: a tile
base computed before a loop whose pointer reuses the register); none of the 79 example /
suite and 219 saved-muGraph programs does, nor the GEMM and attention fuzz families' sample
translation units.  The rule is conservative: ptxas recomputes the derived value from the
reused register only at times (its register pressure decides).

`separate_shared_addresses` removes the pattern from the PTX: the symbol's address also goes
into a fresh register that is never set again, and the reads that only the first `mov`
reaches (reaching definitions over the function's control flow) read that register.  The
values are the same; ptxas then rebuilds the tile base from the shared window's base
(`LEA R42, R12, UR4, 0x2` in 423's loop, where it had `LEA R40, R13, R38, 0x2` from the
loop's pointer).  `compile_cuda` (driver/nvcc.py) assembles such a module from its rewritten
PTX with the usual options, and falls back to ptxas -O0 (`SAFE_PTXAS_OPTIONS`, slower code,
right numbers, a `PtxasGuardWarning`) should the rewrite leave a hit.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

_ENTRY = re.compile(r"^\.(?:visible\s+)?\.entry\s+(\w+)")
_SHARED_SYMBOL = re.compile(r"\.shared\s+(?:\.align\s+\d+\s+)?\.\w+\s+(\w+)")
_SYMBOL_ADDRESS = re.compile(r"^\s*mov\.u(?:32|64)\s+(%rd?\d+),\s*(\w+)\s*;")
_INSTRUCTION = re.compile(r"^\s*(@!?%\w+\s+)?([a-z][\w.:]*)\s+(.*);")
_NO_OPERANDS = re.compile(r"^\s*(@!?%\w+\s+)?(ret|exit|trap)\s*;")
_REGISTER = re.compile(r"%rd?\d+(?!\d)")
_LABEL = re.compile(r"^\s*([$\w]+):")
_BRANCH = re.compile(r"\bbra(?:\.uni)?\s+([$\w]+)\s*;")
_REG_DECLARATION = re.compile(r"^\s*\.reg\s")
_NO_RESULT = ("st.", "bra", "ret", "bar.", "red.", "cp.async", "prefetch", "fence", "membar", "brx")
"""Instructions that write no register: a first operand is read (a store's address)."""

SAFE_PTXAS_OPTIONS: tuple[str, ...] = ("-Xptxas", "-O0")
"""The nvcc options that compile a module the rewrite could not clear (ptxas without its
optimizer)."""

PTXAS_GUARD = "ptxas-guard-3"
"""Part of the cubin cache key: cubins compiled before the guard (or by another version of it)
are not reused."""

_FRESH = "%mx_shared"
"""The prefix of the registers `separate_shared_addresses` declares (no NVVM register has it)."""


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
    """One PTX instruction: the registers it writes and reads, whether a guard predicate makes
    its writes conditional, and the branch target or end of the function it may jump to."""

    writes: tuple[str, ...]
    reads: tuple[str, ...]
    predicated: bool
    target: str | None
    falls_through: bool

    @property
    def result(self) -> str | None:
        """The one register written, or None (no register or several: a vector, `%r|%p`)."""
        return self.writes[0] if len(self.writes) == 1 else None


def _operands(text: str) -> list[str]:
    """`text` split at its top-level commas (not inside `{...}` vectors or `[...]` addresses)."""
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for ch in text:
        depth += (ch in "{[") - (ch in "}]")
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    return [*parts, "".join(current)]


def _instruction(line: str) -> _Instruction | None:
    """`line` parsed, or None when it is no instruction (a label, a declaration, a comment)."""
    if m := _NO_OPERANDS.match(line):
        return _Instruction((), (), m.group(1) is not None, None, m.group(1) is not None)
    m = _INSTRUCTION.match(line)
    if not m:
        return None
    predicated, opcode, text = m.group(1) is not None, m.group(2), m.group(3)
    first, *rest = _operands(text)
    writes = () if opcode.startswith(_NO_RESULT) or "[" in first else tuple(_REGISTER.findall(first))
    reads = tuple(_REGISTER.findall(",".join(rest))) + (() if writes else tuple(_REGISTER.findall(first)))
    branch = _BRANCH.search(line)
    return _Instruction(writes, reads, predicated, branch.group(1) if branch else None, not branch or predicated)


def _functions(lines: Sequence[str]) -> Iterator[tuple[str, int, int]]:
    """(kernel name, first line, line after its closing brace) of each `.entry`: braces are
    counted, since inline assembly opens scopes of its own (`{ .reg .b64 pol; ... }`)."""
    k = 0
    while k < len(lines):
        entry = _ENTRY.match(lines[k])
        if not entry:
            k += 1
            continue
        depth, opened, end = 0, False, len(lines)
        for q in range(k, len(lines)):
            code = lines[q].split("//", 1)[0]
            depth += code.count("{") - code.count("}")
            opened = opened or depth > 0
            if opened and depth == 0:
                end = q + 1
                break
        yield entry.group(1), k, end
        k = end


def _loops(parsed: dict[int, _Instruction], labels: dict[str, int]) -> list[tuple[int, int]]:
    """(label line, backward branch line) of every loop."""
    return [(labels[i.target], k) for k, i in parsed.items() if i.target in labels and labels[i.target] < k]


def _labels(lines: Sequence[str], start: int, end: int) -> dict[str, int]:
    return {m.group(1): k for k in range(start, end) if (m := _LABEL.match(lines[k]))}


def _function_hits(lines: Sequence[str], start: int, end: int, kernel: str, shared: set[str]) -> list[SmemRegisterReuse]:
    parsed = {k: i for k in range(start, end) if (i := _instruction(lines[k])) is not None}
    loops = _loops(parsed, _labels(lines, start, end))
    definitions = Counter(r for i in parsed.values() for r in i.writes)
    hits = []
    for k in range(start, end):
        found = _SYMBOL_ADDRESS.match(lines[k])
        if not found or found.group(2) not in shared:
            continue
        register = found.group(1)
        again = next((q for q in range(k + 1, end) if q in parsed and register in parsed[q].writes), None)
        if again is None:
            continue
        around = [range(a, b + 1) for a, b in loops if a <= again <= b]
        # values computed once from the symbol's address before the register is set again (one
        # step): what ptxas rematerializes.  Not those computed in a loop around the second
        # definition (they read the new value) nor registers set more than once (induction
        # variables: ptxas keeps them, it cannot recompute them from one expression).
        derived = {
            result
            for q in range(k + 1, again)
            if q in parsed
            and register in parsed[q].reads
            and (result := parsed[q].result) not in (None, register)
            and definitions[result] == 1
            and not any(q in r for r in around)
        }
        later = [q for r in [range(again + 1, end), *around] for q in r]
        read = next((q for q in later if q in parsed and derived & set(parsed[q].reads)), None)
        if read is not None:
            value = min(derived & set(parsed[read].reads))
            hits.append(SmemRegisterReuse(kernel, register, k + 1, again + 1, value, read + 1))
    return hits


def smem_register_reuse(ptx: str) -> list[SmemRegisterReuse]:
    """The register reuses of `ptx` that ptxas 13.0 miscompiles (module docstring), at most one
    per register set to a shared symbol's address.  PTX registers are per function.

    Raises:
        Nothing: text that is not PTX has no hits."""
    lines = ptx.splitlines()
    shared = set(_SHARED_SYMBOL.findall(ptx))  # `smem`, the sm_90a kernels' `smem_raw` (mangled), ...
    return [hit for kernel, start, end in _functions(lines) for hit in _function_hits(lines, start, end, kernel, shared)]


def _reaching(
    lines: Sequence[str], parsed: dict[int, _Instruction], start: int, end: int, register: str
) -> dict[int, frozenset[int]] | None:
    """For each instruction line of the function [start, end): the lines whose writes of
    `register` may reach it (-1: the function's entry, where it is unset).  None when a branch
    leaves for a label the function does not have (the flow is not known)."""
    labels = _labels(lines, start, end)
    if any(i.target is not None and i.target not in labels for i in parsed.values()):
        return None
    order = sorted(parsed)
    following = {k: order[n + 1] if n + 1 < len(order) else None for n, k in enumerate(order)}
    first_after = {label: next((q for q in order if q > line), None) for label, line in labels.items()}
    successors: dict[int, list[int]] = {}
    for k, i in parsed.items():
        nxt = [following[k]] if i.falls_through else []
        nxt += [first_after[i.target]] if i.target is not None else []
        successors[k] = [q for q in nxt if q is not None]
    into: dict[int, frozenset[int]] = {k: frozenset() for k in order}
    if order:
        into[order[0]] = frozenset({-1})
    work = list(order)
    while work:
        k = work.pop()
        i = parsed[k]
        if register not in i.writes:
            out = into[k]
        else:  # a predicated write may not happen: what reached it still reaches past it
            out = into[k] | {k} if i.predicated else frozenset({k})
        for q in successors[k]:
            if not out <= into[q]:
                into[q] = into[q] | out
                work.append(q)
    return into


def separate_shared_addresses(ptx: str) -> str:
    """`ptx` rewritten so that no value is derived from a reused shared-address register: for
    each hit of `smem_register_reuse`, the symbol's address is also moved into a fresh register
    that is never set again (`%mx_shared<n>`, declared in the kernel), and every read of the
    reused register that only its `mov` of the symbol reaches reads the fresh register instead.
    The program computes the same values; what ptxas may rematerialize is then derived from a
    register that keeps its value.  Text without hits is returned unchanged.

    Raises:
        Nothing: a function whose control flow is not understood is left as it is (the caller
        checks the result with `smem_register_reuse` again)."""
    lines = ptx.splitlines()
    shared = set(_SHARED_SYMBOL.findall(ptx))
    fresh = 0
    inserts: dict[int, list[str]] = {}
    for kernel, start, end in _functions(lines):
        hits = _function_hits(lines, start, end, kernel, shared)
        if not hits:
            continue
        parsed = {k: i for k in range(start, end) if (i := _instruction(lines[k])) is not None}
        declarations: list[str] = []
        for hit in hits:
            mov, register = hit.line - 1, hit.register
            reaching = _reaching(lines, parsed, start, end, register)
            if reaching is None:
                continue
            name = f"{_FRESH}{fresh}"
            fresh += 1
            kind = ".b64" if register.startswith("%rd") else ".b32"
            declarations.append(f"\t.reg {kind} \t{name};")
            inserts.setdefault(mov, []).append(_REGISTER.sub(name, lines[mov], count=1))
            for q, into in reaching.items():
                if into == {mov} and register in parsed[q].reads:
                    lines[q] = _rename_reads(lines[q], parsed[q], register, name)
        # beside the kernel's own declarations, which come before its first instruction (inline
        # assembly declares registers in scopes of its own further down)
        body = next(k for k in range(start, end) if "{" in lines[k].split("//", 1)[0])
        first = min(parsed, default=end)
        last_declaration = max((k for k in range(body, first) if _REG_DECLARATION.match(lines[k])), default=body)
        inserts.setdefault(last_declaration, []).extend(declarations)
    if not inserts:
        return ptx
    out = []
    for k, line in enumerate(lines):
        out.append(line)
        out.extend(inserts.get(k, []))
    return "\n".join(out) + ("\n" if ptx.endswith("\n") else "")


def _rename_reads(line: str, instruction: _Instruction, register: str, name: str) -> str:
    """`line` with `register` replaced by `name` where it is read (not where it is written)."""
    m = _INSTRUCTION.match(line)
    assert m is not None
    first, *rest = _operands(m.group(3))
    pattern = re.compile(re.escape(register) + r"(?!\d)")
    if not instruction.writes:
        first = pattern.sub(name, first)
    rest = [pattern.sub(name, r) for r in rest]
    return line[: m.start(3)] + ",".join([first, *rest]) + line[m.end(3) :]
