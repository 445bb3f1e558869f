"""`mirage-opt`: xDSL's opt driver with the kn/tb/cute dialects, our passes, targets and the
Mirage muGraph JSON frontend registered.

    mirage-opt rmsnorm_bs1.json                       # import a saved muGraph file (.json => mugraph)
    mirage-opt graph.mlir -p mirage-transpile -t cuda # full pipeline, print CUDA
    mirage-opt softmax.tc --tc-sizes N=64,D=128       # Tensor Comprehensions (.tc => tc)
    mirage-opt examples/tc/lora.tc                    # sizes from the file's '# sizes:' line

Errors (bad input, failed verification, failed pass) are printed as one located message on
stderr with exit code 1, never as a Python traceback.
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import sys
from collections.abc import Sequence
from typing import IO

from xdsl.dialects.arith import Arith
from xdsl.dialects.builtin import Builtin, ModuleOp
from xdsl.dialects.func import Func
from xdsl.passes import ModulePass
from xdsl.transforms import get_all_passes as get_upstream_passes
from xdsl.utils.exceptions import ArgSpecParseError, DiagnosticException, ParseError
from xdsl.xdsl_opt_main import xDSLOptMain

from mirage_xdsl.dialects.kn.graph_verify import verify_kernel_graphs
from mirage_xdsl.driver.registry import get_all_dialects, get_all_targets
from mirage_xdsl.frontends.nesting import check_nesting
from mirage_xdsl.frontends.tc.errors import TcError
from mirage_xdsl.passes import get_all_passes

UPSTREAM_PASSES = ("canonicalize", "cse", "dce")


class MirageOptMain(xDSLOptMain):
    """The opt tool: upstream builtin/func/arith plus our dialects, passes and targets."""

    version_format = "mirage-opt (mirage_xdsl 0.1.0, xdsl {xdsl_version})"

    def register_all_dialects(self) -> None:
        """Load upstream builtin, func and arith, and register ours (kn, tb, cute, contraction, mpk), loaded lazily."""
        for dialect in (Builtin, Func, Arith):
            self.ctx.load_dialect(dialect)
        for name, factory in get_all_dialects().items():
            self.ctx.register_dialect(name, factory)

    def setup_pipeline(self) -> None:
        """xDSL's pipeline, whose first callback (before any pass) also runs the module-level
        checks of kernel graphs (SSA dominance, signature tensors and strides) after the op
        verifiers, unless `--disable-verify`."""
        super().setup_pipeline()
        verify_ops = self.pipeline.callback

        def callback(previous: ModulePass | None, module: ModuleOp, following: ModulePass | None) -> None:
            if verify_ops is not None:
                verify_ops(previous, module, following)
            if previous is None and not self.args.disable_verify:
                verify_kernel_graphs(module)

        self.pipeline = dataclasses.replace(self.pipeline, callback=callback)

    def parse_chunk(self, chunk: IO[bytes], file_extension: str, start_offset: int = 0) -> ModuleOp | None:
        """Refuse over-deep bracket nesting (located) before the recursive parsers see it."""
        data = chunk.read()
        check_nesting(data.decode("utf-8", errors="replace"), self.get_input_name(), start_offset)
        return super().parse_chunk(io.BytesIO(data), file_extension, start_offset)

    def register_all_passes(self) -> None:
        """Register the upstream passes of `UPSTREAM_PASSES` (canonicalize, cse, dce) and all of ours."""
        upstream = get_upstream_passes()
        for name in UPSTREAM_PASSES:
            self.register_pass(name, upstream[name])
        for name, factory in get_all_passes().items():
            self.register_pass(name, factory)

    def register_all_targets(self) -> None:
        """Register our output targets (`-t cuda`, `-t mugraph`), then xDSL's own."""
        for name, factory in get_all_targets().items():
            self.available_targets[name] = factory
        super().register_all_targets()

    def register_all_frontends(self) -> None:
        """xDSL's frontends plus the Mirage muGraph JSON importer (`.json`, `.mugraph`) and Tensor Comprehensions (`.tc`)."""
        super().register_all_frontends()

        def parse_mugraph(stream: IO[bytes]) -> ModuleOp:
            from mirage_xdsl.frontends.mugraph_import import import_mugraph

            return import_mugraph(stream.read().decode(), era=self.args.mugraph_era, name=self.get_input_name())

        self.available_frontends["json"] = parse_mugraph
        self.available_frontends["mugraph"] = parse_mugraph
        self.available_frontends["tc"] = self._parse_tc

    def _parse_tc(self, stream: IO[bytes]) -> ModuleOp:
        """Tensor Comprehensions source -> kernel graph: every definition (or `--tc-def`), sizes
        from the source's `# sizes:` line, `--tc-sizes` overriding them."""
        from mirage_xdsl.frontends.tc import parse_sizes, tc_file

        sizes = parse_sizes(self.args.tc_sizes)
        return tc_file(stream.read().decode(), self.get_input_name(), sizes, name=self.args.tc_def)

    def register_all_arguments(self, arg_parser: argparse.ArgumentParser) -> None:
        """xDSL's options plus `--mugraph-era`, `--tc-sizes` and `--tc-def` for our frontends."""
        super().register_all_arguments(arg_parser)
        arg_parser.add_argument(
            "--mugraph-era",
            choices=("A", "B", "C"),
            default=None,
            help="schema era of a Mirage muGraph JSON file (dtype codes, accumulator names); "
            "default: era A when detected (code 921 or tb_accum_* names), else C",
        )
        arg_parser.add_argument(
            "--tc-sizes", default="",
            help="sizes of a Tensor Comprehensions input, e.g. N=64,D=128 (override its '# sizes:' line)"
        )
        arg_parser.add_argument("--tc-def", default=None, help="the TC definition to compile (default: every one)")


def _one_line(err: BaseException) -> str:
    """The error as one line: `file:line:col: message` for parse errors, else the message."""
    if isinstance(err, ParseError):
        return f"{err.span.get_location()}: {err.msg}"
    if isinstance(err, TcError):
        return f"{err.location}: {err.message}"
    text = " ".join(part.strip() for part in str(err).splitlines() if part.strip())
    return text or type(err).__name__


def _input_name(argv: Sequence[str] | None) -> str:
    """The input file named on the command line (first positional argument), for messages
    about errors that carry no location of their own."""
    args = sys.argv[1:] if argv is None else list(argv)
    return next((a for a in args if not a.startswith("-") and a.endswith((".mlir", ".json", ".mugraph"))), "the input")


def _internal_error(err: BaseException, argv: Sequence[str] | None) -> str:
    """A sentence for an exception no check anticipated (a KeyError's text is a bare key)."""
    where = _input_name(argv)
    if isinstance(err, RecursionError):
        return f"{where}: the input nests too deeply to process (Python's recursion limit); flatten it"
    if isinstance(err, MemoryError):
        return f"{where}: ran out of memory; a size or an integer type width in the input is far too large"
    detail = _one_line(err)
    return (
        f"{where}: internal error ({type(err).__name__}: {detail}); the input passed the checks but a pass "
        "could not handle it: please report this with the input file"
    )


def main(argv: Sequence[str] | None = None) -> None:
    """Console entry point; exits 1 with one clean `mirage-opt: error:` line on any error.

    Raises:
        SystemExit: code 1 after an error (code 2 for argparse usage errors, 0 for --help).
    """
    try:
        MirageOptMain(description="Mirage multi-level tensor compiler (xDSL)", args=argv).run()
    except (ParseError, DiagnosticException) as err:
        print(f"mirage-opt: error: {_one_line(err)}", file=sys.stderr)
        sys.exit(1)
    except (ValueError, OSError) as err:
        # pipeline-spec errors (unknown pass/option), importer errors, unreadable files
        print(f"mirage-opt: error: {_one_line(err)}", file=sys.stderr)
        sys.exit(1)
    except BaseException as err:  # noqa: BLE001 - ArgSpecParseError derives from BaseException
        if isinstance(err, (SystemExit, KeyboardInterrupt)):
            raise
        if isinstance(err, ArgSpecParseError):
            print(f"mirage-opt: error: {_one_line(err)}", file=sys.stderr)
        else:
            print(f"mirage-opt: error: {_internal_error(err, argv)}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
