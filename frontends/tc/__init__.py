"""Tensor Comprehensions frontend: TC source -> checked tree -> kernel graph (`kn`).

    import mirage_xdsl as mx
    module = mx.tc('''
        def mlp(float(B, D) X, float(D, H) W1, float(H, E) W2) -> (Y, Z) {
            Y(b, h) +=! X(b, d) * W1(d, h)
            Z(b, e) +=! fmax(Y(b, h), 0) * W2(h, e)
        }''', sizes={"B": 8, "D": 64, "H": 128, "E": 32})

Pipeline: `parser.parse` (lark LALR grammar `grammar.lark`), `checks.check` (names, types,
ranges, shapes, DAG), `lower.lower` (builder API); `interpret.interpret` evaluates a checked
definition directly in numpy.  `files.tc_file` compiles a `.tc` file: every definition, with
the sizes of its `# sizes: N=64,D=128` comment line (examples/tc/ holds such files).  Every problem is a located `TcError`
(`FILE:LINE:COL: error: MESSAGE`).
"""

from __future__ import annotations

from collections.abc import Mapping

from xdsl.dialects.builtin import ModuleOp

from mirage_xdsl.frontends.tc.checked_def import CheckedDef
from mirage_xdsl.frontends.tc.checks import check
from mirage_xdsl.frontends.tc.errors import TcError
from mirage_xdsl.frontends.tc.files import parse_sizes, read_sizes_header, tc_file
from mirage_xdsl.frontends.tc.interpret import interpret
from mirage_xdsl.frontends.tc.lower import lower
from mirage_xdsl.frontends.tc.parser import parse

__all__ = [
    "TcError",
    "check",
    "check_source",
    "interpret",
    "lower",
    "parse",
    "parse_sizes",
    "read_sizes_header",
    "tc",
    "tc_file",
]


def check_source(source: str, name: str | None = None, filename: str = "<tc>") -> CheckedDef:
    """Parse and check one definition of `source` (the only one when `name` is None).

    Raises:
        TcError: a syntax or semantic error.
    """
    return check(parse(source, filename), name)


def tc(
    source: str,
    name: str | None = None,
    sizes: Mapping[str, int] | None = None,
    filename: str = "<tc>",
) -> ModuleOp:
    """Compile TC source to a kernel-graph module.

    Args:
        source: TC text with one or more `def`s.
        name: the definition to compile; None for the only one.
        sizes: a positive int for every size symbol of the inputs, e.g. `{"N": 64, "D": 128}`.
        filename: the name used in error locations.

    Returns:
        a verified `builtin.module` holding the kernel graph as one `func.func` named after
        the definition (inputs row-major in parameter order, outputs in declared order).

    Raises:
        TcError: a syntax, semantic or size error, or a construct kn cannot express yet.
    """
    return lower(check_source(source, name, filename), dict(sizes or {}))
