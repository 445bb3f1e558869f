"""`python -m mirage_xdsl.tools.cuda_hashes OUT.json [--compare BEFORE.json]`: the sha256 of the
printed CUDA (and of the launch plan) of every example graph under every seed variant.

For a refactoring that must leave the generated code byte-identical: run it before and after
(e.g. on two worktrees, each importable as `mirage_xdsl`) and compare.  Candidates: every
function of `examples/*.mlir` and every graph of `examples/mugraphs/*.json`, each through the
default pipeline and the variants `VARIANTS` (`bench.prepare.parse_variant` turns a label
into `mirage-transpile` options); CUDA for `sm_90a`, no nvcc, no GPU.  About 40 s of CPU.
A candidate the compiler rejects is recorded as `ERROR <type>: <first line>`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

VARIANTS = (None, "c0", "c1", "c0x", "c0xr", "c0xo")
"""None = the default pipeline; the others are seed labels of the tuner's space."""


def cuda_hashes(repo: Path, arch: str = "sm_90a") -> dict[str, str]:
    """{`<file>::<graph>@<variant>`: `<sha256 of the CUDA> plan=<sha256[:16] of the plan>`}."""
    from mirage_xdsl.bench.prepare import parse_variant
    from mirage_xdsl.driver.compile import prepare
    from mirage_xdsl.driver.load import functions, load_module
    from mirage_xdsl.frontends.mugraph_import import load_mugraph_file

    out: dict[str, str] = {}
    files = sorted((repo / "examples").glob("*.mlir")) + sorted((repo / "examples/mugraphs").glob("*.json"))
    for path in files:
        module = load_mugraph_file(path) if path.suffix == ".json" else load_module(path)
        for name in [f.sym_name.data for f in functions(module)]:
            for variant in VARIANTS:
                key = f"{path.relative_to(repo)}::{name}@{variant or 'default'}"
                try:
                    p = prepare(module, name, arch, options=parse_variant(variant) if variant else None)
                    source = hashlib.sha256(p.program.source.encode()).hexdigest()
                    plan = hashlib.sha256(p.plan.to_json().encode()).hexdigest()
                    out[key] = f"{source} plan={plan[:16]}"
                except Exception as err:  # noqa: BLE001 - recorded, compared like a hash
                    text = str(err).splitlines()[0][:200] if str(err) else ""
                    out[key] = f"ERROR {type(err).__name__}: {text}"
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Write the hashes; with `--compare`, print the candidates that differ (exit status 1 if any)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", help="JSON file to write")
    ap.add_argument("--compare", help="an earlier output to compare with")
    ap.add_argument("--repo", default=str(Path(__file__).resolve().parents[1]), help="the tree whose examples to use")
    args = ap.parse_args(argv)
    start = time.perf_counter()
    hashes = cuda_hashes(Path(args.repo))
    Path(args.out).write_text(json.dumps(hashes, indent=1, sort_keys=True))
    errors = sum(v.startswith("ERROR") for v in hashes.values())
    print(f"{len(hashes)} candidates, {errors} rejected, {time.perf_counter() - start:.0f} s")
    if not args.compare:
        return 0
    before = json.loads(Path(args.compare).read_text())
    diff = sorted(k for k in set(before) | set(hashes) if before.get(k) != hashes.get(k))
    for k in diff:
        print(f"differs: {k}")
    print(f"{len(diff)} of {len(hashes)} candidates differ")
    return 1 if diff else 0


if __name__ == "__main__":
    sys.exit(main())
