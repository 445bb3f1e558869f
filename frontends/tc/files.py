"""TC source files: the sizes that travel with a file, and every definition of it in one module.

A `.tc` file names its concrete sizes in a comment line, which the TC grammar ignores:

    # sizes: B=16, D=4096, N=6144
    def rmsnorm_linear(half(B, D) X, half(D, N) W) -> (SS, O) { ... }

`read_sizes_header` reads that line (at most one per file); `tc_file` compiles the file's
definitions with the header's sizes, sizes given by the caller (`--tc-sizes`,
`load_module(path, sizes=...)`) overriding them symbol by symbol.  `parse_sizes` reads the
`NAME=INT,...` text both use.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from xdsl.dialects.builtin import ModuleOp

from mirage_xdsl.frontends.tc.ast_nodes import Loc
from mirage_xdsl.frontends.tc.checked_def import CheckedDef
from mirage_xdsl.frontends.tc.checks import check, select_def
from mirage_xdsl.frontends.tc.errors import TcError
from mirage_xdsl.frontends.tc.lower import lower
from mirage_xdsl.frontends.tc.parser import parse

__all__ = ["SizesHeader", "parse_sizes", "read_sizes_header", "tc_file"]

_HEADER = re.compile(r"^[ \t]*#[ \t]*sizes[ \t]*:", re.M)
_ENTRY = re.compile(r"[^,]+")


@dataclass(frozen=True)
class SizesHeader:
    """The `# sizes:` line of a TC file.

    Attributes:
        sizes: `{symbol: int}` as written (empty: no header).
        locs: where each entry starts (1-based line and column).
        loc: where the line starts; None when the file has none.
    """

    sizes: dict[str, int] = field(default_factory=dict)
    locs: dict[str, Loc] = field(default_factory=dict)
    loc: Loc | None = None


def _entries(text: str) -> list[tuple[str, int]]:
    """The non-blank comma-separated entries of `text` with their 0-based offsets."""
    return [(m.group().strip(), m.start() + len(m.group()) - len(m.group().lstrip())) for m in _ENTRY.finditer(text) if m.group().strip()]


def _entry(entry: str) -> tuple[str, int] | None:
    """`(NAME, value)` of a `NAME=INT` entry, None when it is not one."""
    key, sep, value = entry.partition("=")
    key, value = key.strip(), value.strip()
    if not sep or not key.isidentifier() or not value.lstrip("-").isdigit():
        return None
    return key, int(value)


def parse_sizes(text: str) -> dict[str, int]:
    """Read `N=64,D=128` (the `--tc-sizes` syntax) into `{"N": 64, "D": 128}`.

    Raises:
        ValueError: an entry that is not `NAME=INT`, or a name given twice.
    """
    sizes: dict[str, int] = {}
    for entry, _ in _entries(text):
        parsed = _entry(entry)
        if parsed is None:
            raise ValueError(f"bad size '{entry}' (expected NAME=INT, e.g. N=64)")
        if parsed[0] in sizes:
            raise ValueError(f"size '{parsed[0]}' given twice")
        sizes[parsed[0]] = parsed[1]
    return sizes


def read_sizes_header(source: str, filename: str = "<tc>") -> SizesHeader:
    """The `# sizes: NAME=INT, ...` comment line of `source` (anywhere, at most one).

    Raises:
        TcError: a second sizes line, an entry that is not `NAME=INT`, a name given twice, or
            a size below 1; located at the line or the entry.
    """
    matches = list(_HEADER.finditer(source))
    if not matches:
        return SizesHeader()
    first = matches[0]
    line = source.count("\n", 0, first.start()) + 1
    if len(matches) > 1:
        again = source.count("\n", 0, matches[1].start()) + 1
        raise TcError(f"a second '# sizes:' line (the first is on line {line}); give every size in one line", again, 1, filename)
    end = source.find("\n", first.end())
    text = source[first.end() : end if end >= 0 else len(source)]
    base_col = first.end() - first.start() + 1
    sizes: dict[str, int] = {}
    locs: dict[str, Loc] = {}
    for entry, offset in _entries(text):
        loc = Loc(line, base_col + offset)
        parsed = _entry(entry)
        if parsed is None:
            raise TcError(f"bad size '{entry}' in the sizes line (expected NAME=INT, e.g. N=64)", loc.line, loc.col, filename)
        key, value = parsed
        if key in sizes:
            raise TcError(f"size '{key}' given twice in the sizes line", loc.line, loc.col, filename)
        if value < 1:
            raise TcError(f"size '{key}' must be a positive int, got {value}", loc.line, loc.col, filename)
        sizes[key], locs[key] = value, loc
    return SizesHeader(sizes, locs, Loc(line, 1))


def tc_file(source: str, filename: str = "<tc>", sizes: Mapping[str, int] | None = None, name: str | None = None) -> ModuleOp:
    """Compile the definitions of a TC file into one kernel-graph module.

    Args:
        source: the file's text.
        filename: the name used in error locations.
        sizes: sizes that override the file's `# sizes:` line, symbol by symbol.
        name: compile only this definition (None: every definition, in file order).

    Returns:
        a `builtin.module` with one `func.func` per compiled definition (see `lower.lower`).

    Raises:
        TcError: a bad sizes line; a syntax, semantic or lowering error; a size symbol that
            none of the compiled definitions declares; a definition's size that neither the
            sizes line nor `sizes` gives (located at the symbol's declaration).
    """
    header = read_sizes_header(source, filename)
    program = parse(source, filename)
    if name is not None:
        defs = [select_def(program, name)]
    else:
        defs = [select_def(program, d.name) for d in program.defs]  # also rejects duplicate names
    checked = [check(program, d.name) for d in defs]
    given = dict(sizes or {})
    in_file = {dim for d in program.defs for p in d.params for dim in p.dims if isinstance(dim, str)}
    compiled = {sym for c in checked for sym in c.symbols}
    # the sizes line may name the sizes of every definition of the file, explicit sizes
    # those of the definitions compiled
    for sym, known, where, what in [
        *((s, in_file, header.locs[s], "the '# sizes:' line") for s in header.sizes if s not in given),
        *((s, compiled, defs[0].loc, "the sizes given") for s in given),
    ]:
        if sym not in known:
            names = ", ".join(sorted(known)) or "none"
            raise TcError(f"unknown size symbol '{sym}' in {what} (the program's sizes: {names})", where.line, where.col, filename)
    merged = {**header.sizes, **given}
    funcs = []
    for c in checked:
        _check_given(c, merged, header)
        module = lower(c, {sym: merged[sym] for sym in c.symbols})
        for op in list(module.body.block.ops):
            op.detach()
            funcs.append(op)
    return ModuleOp(funcs)


def _check_given(checked: CheckedDef, sizes: Mapping[str, int], header: SizesHeader) -> None:
    """Every size symbol of `checked` has a size; else a located error saying where to give it."""
    for sym, loc in checked.symbols.items():
        if sym not in sizes:
            missing = [s for s in checked.symbols if s not in sizes]
            hint = ",".join(f"{s}=64" for s in missing)
            place = "its '# sizes:' line" if header.loc is not None else f"a '# sizes: {hint}' line"
            raise checked.error(f"missing size for '{sym}' (give it in {place} or with --tc-sizes)", loc)
