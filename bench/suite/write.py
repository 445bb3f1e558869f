"""Build the suite's kernel graphs and write them to `examples/suite/<workload>.mlir`.

    python -m mirage_xdsl.bench.suite.write            # (re)write every file
    python -m mirage_xdsl.bench.suite.write --check    # exit 1 if a file differs from its builder

The files are what `mirage-bench` compiles (bench/workloads.py registers one workload per
file); test/e2e/test_suite.py checks that they equal their builders' output.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from xdsl.dialects.builtin import ModuleOp

from mirage_xdsl.bench.suite import graphs
from mirage_xdsl.bench.suite.table import SUITE, SuiteWorkload

SUITE_DIR = Path(__file__).resolve().parents[2] / "examples" / "suite"
"""examples/suite/ of the repository."""


def build(workload: SuiteWorkload, name: str | None = None, **sizes: Any) -> ModuleOp:
    """The kernel graph of `workload` (function `name`, default the workload's name) at its
    sizes, or at `sizes` where given (the tests' reduced sizes).

    Raises:
        GraphBuildError: the sizes break a shape rule of the builder.
    """
    builder = getattr(graphs, workload.program)
    return builder(workload.dtype, name or workload.name, **(sizes or workload.sizes))


def text_of(workload: SuiteWorkload) -> str:
    """The `.mlir` text of `workload` as written to examples/suite/: a comment (the
    builder's summary, the sizes), then the module."""
    from io import StringIO

    from xdsl.printer import Printer

    buf = StringIO()
    Printer(stream=buf).print_op(build(workload))
    doc = " ".join((getattr(graphs, workload.program).__doc__ or "").split("\n\n")[0].split())
    sizes = ", ".join(f"{k}={v}" for k, v in workload.sizes.items())
    header = f"// {workload.name}: {doc}\n// {workload.dtype}, {sizes}; written by python -m mirage_xdsl.bench.suite.write\n"
    return header + buf.getvalue().rstrip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    """Write (or with `--check` compare) every suite file; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m mirage_xdsl.bench.suite.write", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare instead of writing; exit 1 on a difference")
    parser.add_argument("--dir", type=Path, default=SUITE_DIR, help="target folder (default examples/suite)")
    args = parser.parse_args(argv)
    stale = []
    args.dir.mkdir(parents=True, exist_ok=True)
    for w in SUITE:
        path = args.dir / f"{w.name}.mlir"
        text = text_of(w)
        if args.check:
            if not path.is_file() or path.read_text() != text:
                stale.append(path.name)
        elif not path.is_file() or path.read_text() != text:
            path.write_text(text)
    if stale:
        print(f"{len(stale)} stale suite file(s): {', '.join(stale)} (rerun without --check)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
