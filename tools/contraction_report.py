"""`mirage-contraction`: the seed-004 Task 4 report for one binary einsum.

    mirage-contraction "cmk,ckn->cmn" 4x4096x4096 4x4096x4096

prints the basic config (`generate_config`, Task 4a), the L2-optimised executable config
(`Optimizer.make_executable`, Task 4b) and why its sizes were chosen.  Bad input gives one
line `mirage-contraction: error: ...` on stderr and exit status 1, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from mirage_xdsl.dialects.contraction.config import format_config, generate_config
from mirage_xdsl.passes.contraction.optimizer import KIB, MIB, Optimizer, TargetModel

PROG = "mirage-contraction"


def parse_shape(text: str) -> tuple[int, ...]:
    """`'4x4096x4096'` -> `(4, 4096, 4096)`.

    Raises:
        ValueError: an empty part or a part that is not a decimal integer.
    """
    parts = text.lower().split("x")
    if not all(p.strip().isdigit() for p in parts):
        raise ValueError(f"shape {text!r} must be sizes joined by 'x', e.g. 4x4096x4096")
    return tuple(int(p) for p in parts)


def build_report(einsum: str, shapes: Sequence[tuple[int, ...]], target: TargetModel) -> list[str]:
    """The report lines: initial config, optimised config, explanation.

    Raises:
        ValueError: bad einsum or shapes (`generate_config`), or a contraction that cannot be
            made executable (`Optimizer.make_executable`).
    """
    config = generate_config(einsum, list(shapes))
    optimizer = Optimizer(config)
    explanation = optimizer.make_executable(target)
    return [
        f"# {einsum} with input shapes {' '.join('x'.join(map(str, s)) for s in shapes)}",
        "## a) initial config (generate_config)",
        *format_config(config),
        f"## b) L2-optimised config (make_executable for {describe_target(target)})",
        *format_config(optimizer.config),
        "## why these sizes",
        *explanation,
    ]


def describe_target(target: TargetModel) -> str:
    """One-line summary of a target model (KiB / MiB).

    Raises:
        Nothing.
    """
    return (
        f"{target.smem_per_block / KIB:g} KiB shared memory per block, {target.l2_bytes / MIB:g} MiB L2, "
        f"{target.num_sms} SMs"
    )


def _arg_parser() -> argparse.ArgumentParser:
    defaults = TargetModel()
    parser = argparse.ArgumentParser(prog=PROG, description="Seed-004 contraction config report (Task 4).")
    parser.add_argument("einsum", help="binary einsum with explicit output, e.g. 'cmk,ckn->cmn'")
    parser.add_argument("shapes", nargs="+", help="one shape per input, sizes joined by 'x', e.g. 4x4096x4096")
    parser.add_argument("--smem-kib", type=int, default=defaults.smem_per_block // KIB, help="shared memory per block")
    parser.add_argument("--l2-mib", type=int, default=defaults.l2_bytes // MIB, help="L2 cache size")
    parser.add_argument("--sms", type=int, default=defaults.num_sms, help="number of SMs")
    return parser


def _fail(message: str) -> int:
    print(f"{PROG}: error: {' '.join(message.split())}", file=sys.stderr)
    return 1


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status (0 ok, 1 bad input).

    Raises:
        Nothing: every ValueError becomes one error line on stderr and status 1.
    """
    parser = _arg_parser()
    parser.error = lambda message: sys.exit(_fail(message))  # type: ignore[method-assign]
    args = parser.parse_args(argv)
    if min(args.smem_kib, args.l2_mib, args.sms) < 1:
        return _fail("--smem-kib, --l2-mib and --sms must be positive")
    target = TargetModel(smem_per_block=args.smem_kib * KIB, l2_bytes=args.l2_mib * MIB, num_sms=args.sms)
    try:
        shapes = [parse_shape(s) for s in args.shapes]
        lines = build_report(args.einsum, shapes, target)
    except ValueError as err:
        return _fail(str(err))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
