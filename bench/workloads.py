"""The benchmark workloads: name -> saved Mirage muGraph file, plain kernel graph, torch program.

Each workload is one fp16 program of Mirage's benchmark set (mirage-notes 2.4).  Its
candidates are every graph of the saved muGraph file (Mirage's superoptimizer output, found in
`examples/mugraphs`, `$MIRAGE_SHARED/mugraphs` or a `--mugraphs DIR`) and every tuning variant of the plain kernel graph
under `examples/` (our kn-fuse kernels).  Optional muGraph files may be missing: the workload
then has no saved-Mirage candidates.  The torch program is the peer every candidate is timed
against; it takes the inputs in the order of the graphs' arguments.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mirage_xdsl.bench import BenchError
from mirage_xdsl.bench.suite.table import SUITE

PACKAGE_ROOT = Path(__file__).resolve().parents[1]
"""The `mirage_xdsl` package directory (the repository root)."""

EXAMPLES = PACKAGE_ROOT / "examples"


def default_mugraph_dir() -> Path:
    """`$MIRAGE_SHARED/mugraphs` when `MIRAGE_SHARED` is set (e.g. `../shared`), else the
    repository's copy of Mirage's saved muGraphs, `examples/mugraphs`."""
    shared = os.environ.get("MIRAGE_SHARED")
    return Path(shared) / "mugraphs" if shared else EXAMPLES / "mugraphs"


@dataclass(frozen=True)
class Workload:
    """One benchmark workload of the table `WORKLOADS`: its name and input files."""

    name: str
    mugraph: str | None
    """file name of the saved Mirage muGraph file (looked up in the muGraph directories)"""
    example: str | None
    """file name of the plain kernel graph under examples/"""
    optional: bool = False
    """the muGraph file may be missing (not in the shared directory)"""


WORKLOADS: tuple[Workload, ...] = (
    Workload("rmsnorm_bs1", "rmsnorm_bs1.json", "rmsnorm_linear.mlir"),
    Workload("rmsnorm_bs8", "rmsnorm_bs8.json", "rmsnorm_linear_bs8.mlir"),
    Workload("gated_mlp", "gated_mlp.json", "gated_mlp.mlir"),
    Workload("gqa_bs1", "gqa_bs1.json", "gqa.mlir"),
    Workload("gqa_bs8", "gqa_bs8.json", "gqa_bs8.mlir"),
    Workload("lora", "lora.json", "lora.mlir"),
    Workload("ntrans_bs1", "ntrans_bs1.json", "ntrans.mlir", optional=True),
    Workload("mha_bs1", "mha_bs1.json", "mha.mlir", optional=True),
    Workload("mqa_bs1", "mqa_bs1.json", "mqa.mlir", optional=True),
    # beyond Mirage's set: programs that need a max reduction (no saved muGraph)
    Workload("softmax", None, "softmax.mlir"),
    Workload("mha_stable", None, "mha_stable.mlir"),
    Workload("attention_prefill", None, "attention_prefill.mlir"),
    # the program suite (issue #30 item 2, bench/suite/): plain graphs of examples/suite/
    *(Workload(w.name, None, w.example) for w in SUITE),
)
BY_NAME = {w.name: w for w in WORKLOADS}
GROUPS: dict[str, tuple[str, ...]] = {"suite": tuple(w.name for w in SUITE)}
"""`--workloads` names that stand for several workloads: `suite` = every suite workload."""


@dataclass(frozen=True)
class Resolved:
    """A workload with its files found: the saved muGraph file (`.json`; absent when an
    optional one is missing) and the plain kernel graph (`.mlir`; absent with --no-examples)."""

    name: str
    files: tuple[Path, ...]


def select(names: str | None) -> list[Workload]:
    """The workloads named in a comma-separated list (None or empty: all but the suite's); a
    group name (`GROUPS`: `suite`) stands for its workloads, a shell-style pattern
    (`suite_decode_*`, `suite_*_bf16`) for the workloads it matches, in table order.

    Raises:
        BenchError: an unknown name, a pattern that matches nothing, or a list of only
            commas and spaces.
    """
    import fnmatch

    if not names:
        return [w for w in WORKLOADS if w.name not in GROUPS["suite"]]
    picked = []
    for name in (n.strip() for n in names.split(",")):
        if not name:
            continue
        if any(c in name for c in "*?[") and name not in BY_NAME:
            members = tuple(w.name for w in WORKLOADS if fnmatch.fnmatchcase(w.name, name))
            if not members:
                raise BenchError(f"workload pattern '{name}' matches no workload")
        elif name not in BY_NAME and name not in GROUPS:
            known = [w.name for w in WORKLOADS if w.name not in GROUPS["suite"]]
            raise BenchError(f"unknown workload '{name}' (known: {', '.join(known)}, the group suite and its members)")
        else:
            members = GROUPS.get(name, (name,))
        for member in members:
            if BY_NAME[member] not in picked:
                picked.append(BY_NAME[member])
    if not picked:
        raise BenchError("--workloads names no workload")
    return picked


def find_mugraph(name: str, dirs: Sequence[Path]) -> Path | None:
    """The file `name` in the first of `dirs` that holds it, or None."""
    for d in dirs:
        if (Path(d) / name).is_file():
            return Path(d) / name
    return None


def resolve(workloads: Sequence[Workload], mugraph_dirs: Sequence[Path], examples: bool = True) -> list[Resolved]:
    """Find the files of `workloads`: muGraph files in `mugraph_dirs` (first hit wins), plain
    graphs under examples/ (left out when `examples` is False).

    Raises:
        BenchError: a required (not optional) muGraph file is in none of `mugraph_dirs`, or a
            plain graph is missing from examples/.
    """
    out = []
    for w in workloads:
        files = []
        if w.mugraph:
            mugraph = find_mugraph(w.mugraph, mugraph_dirs)
            if mugraph is None and not w.optional:
                where = ", ".join(str(d) for d in mugraph_dirs) or "no directory"
                raise BenchError(f"{w.mugraph}: not found in {where} (set MIRAGE_SHARED or give --mugraphs DIR)")
            if mugraph is not None:
                files.append(mugraph)
        if examples and w.example:
            example = EXAMPLES / w.example
            if not example.is_file():
                raise BenchError(f"{example}: no such file")
            files.append(example)
        out.append(Resolved(w.name, tuple(files)))
    return out


def workload_of_file(path: Path) -> str:
    """The workload a file belongs to: the table's entry naming it, else the file's stem
    (`tc_<stem>` for a Tensor Comprehensions `.tc` file, whose stem may be a workload's
    name: examples/tc/lora.tc computes lora's program with other outputs)."""
    if path.suffix == ".tc":
        return f"tc_{path.stem}"
    for w in WORKLOADS:
        if path.name in (w.mugraph, w.example and Path(w.example).name):
            return w.name
    return path.stem


def resolve_files(files: Sequence[str], mugraph_dirs: Sequence[Path]) -> list[Resolved]:
    """`--files`: names or paths (a bare name is looked up in `mugraph_dirs`, then under
    examples/, examples/suite/ and examples/tc/), grouped by workload: table order first, then files of no known
    workload, each its own workload named after the file's stem (`workload_of_file`).

    Raises:
        BenchError: a file is found nowhere.
    """
    groups: dict[str, list[Path]] = {}
    for text in files:
        path = Path(text)
        if not path.is_file():
            path = find_mugraph(text, mugraph_dirs) or EXAMPLES / text
            for sub in ("suite", "tc"):
                if not path.is_file() and (EXAMPLES / sub / text).is_file():
                    path = EXAMPLES / sub / text
        if not path.is_file():
            where = ", ".join([str(d) for d in mugraph_dirs] + ["examples/", "examples/suite/", "examples/tc/"])
            raise BenchError(f"{text}: no such file (looked in {where})")
        paths = groups.setdefault(workload_of_file(path), [])
        if path.resolve() not in [p.resolve() for p in paths]:
            paths.append(path)
    order = [w.name for w in WORKLOADS if w.name in groups] + [n for n in groups if n not in BY_NAME]
    return [Resolved(name, tuple(groups[name])) for name in order]


# ---------------------------------------------------------------------------------------
# The torch program of a workload


def torch_rms(x: Any, ndims: int = 1) -> Any:
    """RMS norm over the last `ndims` dims (no epsilon, no gain: Mirage's rms_norm)."""
    import torch  # type: ignore[import-not-found]

    dims = tuple(range(x.dim() - ndims, x.dim()))
    return x * torch.rsqrt(torch.mean(x * x, dim=dims, keepdim=True))


def torch_attention(q: Any, k: Any, v: Any) -> Any:
    """softmax(Q @ K) @ V (K stored transposed, as in Mirage's graphs)."""
    import torch  # type: ignore[import-not-found]

    return torch.softmax(q @ k, dim=-1) @ v


def torch_stable_attention(q: Any, k: Any, v: Any) -> Any:
    """`softmax(q @ k / sqrt(head_dim)) @ v` (k stored transposed: [.., head_dim, keys]); torch's
    softmax subtracts the row max."""
    import torch  # type: ignore[import-not-found]

    return torch.softmax((q @ k) * (1.0 / q.shape[-1] ** 0.5), dim=-1) @ v


def _torch_chain(x: Any, *weights: Any) -> Any:
    """examples/megakernel chain40: `h = relu(h @ W_i)` for each weight in turn."""
    import torch  # type: ignore[import-not-found]

    for w in weights:
        x = torch.relu(x @ w)
    return x


def _torch_decoder(x: Any, *inputs: Any) -> tuple[Any, ...]:
    """examples/megakernel decoder_layer[_bs8] / decoder_4layers: per layer (inputs Wq, Wk, Wv,
    K, V, Wo, W1, W3, W2) RMSNorm, Q/K/V projections, GQA decode attention over the cache
    (Q [batch, 4096] viewed as [K rows, group, head dim]), O projection + residual, RMSNorm,
    gated MLP + residual; returns every layer's (k_new, v_new), then the last output."""
    import torch  # type: ignore[import-not-found]

    silu = torch.nn.functional.silu

    def rms(t: Any) -> Any:  # in fp32: a later layer's x*x overflows fp16, as ours does not
        return (t.float() * torch.rsqrt(torch.mean(t.float() * t.float(), dim=-1, keepdim=True))).to(t.dtype)

    outs: list[Any] = []
    for i in range(0, len(inputs), 9):
        wq, wk, wv, k, v, wo, w1, w3, w2 = inputs[i : i + 9]
        n = rms(x)
        q = (n @ wq).reshape(k.shape[0], -1, k.shape[1])
        o = torch_stable_attention(q, k, v).reshape(x.shape[0], -1)
        h = x + o @ wo
        n2 = rms(h)
        x = h + (silu(n2 @ w1) * (n2 @ w3)) @ w2
        outs += [n @ wk, n @ wv]
    return (*outs, x)


def torch_workload_program(stem: str) -> Callable[..., Any] | None:
    """The torch program of a Mirage benchmark workload, known by its muGraph file stem or
    workload name (`rmsnorm_bs1`, `gqa_bs8`, `single_gqa`, ...) or a suite workload's name
    (`suite_softmax_f16`: bench/suite/torch_programs.py); None if unknown.  Needs torch."""
    import torch  # type: ignore[import-not-found]

    from mirage_xdsl.bench.suite.torch_programs import torch_program

    if (suite := torch_program(stem)) is not None:
        return suite

    stem = stem.removeprefix("single_")
    silu = torch.nn.functional.silu
    table: list[tuple[str, Callable[..., Any]]] = [
        ("rmsnorm", lambda x, w: torch_rms(x) @ w),
        ("gated_mlp", lambda x, w1, w2: silu(x @ w1) * (x @ w2)),
        ("qknorm_gqa", lambda q, k, v: torch_attention(torch_rms(q), k, torch_rms(v))),
        ("gqa", torch_attention),
        ("mha_stable", torch_stable_attention),
        ("attention_prefill", torch_stable_attention),
        ("mha", torch_attention),
        ("mqa", torch_attention),
        ("lora", lambda x, w, a, b: x @ w + (x @ a) @ b),
        ("ntrans", lambda h, x, alpha: torch_rms(x + alpha * (torch_rms(h) + x))),
        ("softmax", lambda x: torch.softmax(x, dim=-1)),
        # examples/megakernel (issue #32)
        ("chain3", lambda x, w: torch.relu(silu(x @ w) @ w)),
        ("chain40", _torch_chain),
        ("decoder_mlp", lambda x, w1, w3, w2: x + (silu(torch_rms(x) @ w1) * (torch_rms(x) @ w3)) @ w2),
        ("decoder_layer", _torch_decoder),
        ("decoder_4layers", _torch_decoder),
    ]
    for prefix, fn in table:
        if stem.startswith(prefix):
            return fn
    return None


@dataclass(frozen=True)
class ContractionWorkload:
    """A binary einsum timed by `mirage-bench --contractions` (bench/contraction.py): our
    sm_90a kernel (`mx.einsum`) against torch on random inputs of `shapes`."""

    name: str
    equation: str
    shapes: tuple[tuple[int, ...], ...]
    dtype: str = "float16"


CONTRACTION_WORKLOADS: tuple[ContractionWorkload, ...] = (
    # issue #31 "Done when": sizes as the issue gives them
    ContractionWorkload("bmm_4x4096", "cmk,ckn->cmn", ((4, 4096, 4096), (4, 4096, 4096))),
    ContractionWorkload("abcd_cde", "abcd,cde->abe", ((8, 256, 64, 64), (64, 64, 1024))),
    ContractionWorkload("bshd_hdn", "bshd,hdn->bsn", ((4, 4096, 32, 128), (32, 128, 4096))),
    ContractionWorkload("bhqd_bkhd", "bhqd,bkhd->bhqk", ((8, 32, 1024, 128), (8, 1024, 32, 128))),
    ContractionWorkload("aebf_dfce", "aebf,dfce->abcd", ((64, 64, 64, 64), (64, 64, 64, 64))),
    # "one with an ELWISE_MUL epilogue": bshd_hdn's projection times an output-shaped factor
    ContractionWorkload("bshd_hdn_mul", "bshd,hdn,bsn->bsn", ((4, 4096, 32, 128), (32, 128, 4096), (4, 4096, 4096))),
    # the square GEMM sweep, fp16 and bf16
    *(
        ContractionWorkload(f"gemm_{n}_{'bf16' if dt == 'bfloat16' else 'fp16'}", "mk,kn->mn", ((n, n), (n, n)), dt)
        for dt in ("float16", "bfloat16")
        for n in (1024, 2048, 4096, 8192, 16384)
    ),
)
CONTRACTIONS_BY_NAME = {w.name: w for w in CONTRACTION_WORKLOADS}
