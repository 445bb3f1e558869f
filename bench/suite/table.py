"""The program suite's table (issue #30 item 2): which programs, at which sizes, in which dtypes.

Each `SuiteProgram` is one program (a builder of `bench/suite/graphs.py`, a torch program of
`bench/suite/torch_programs.py`) with its size points; each point in each dtype is one
`mirage-bench` workload, `suite_<program><point>_<dtype>` (`suite_softmax_f16`,
`suite_decode_g8_kv32k_bf16`), whose plain kernel graph is `examples/suite/<name>.mlir`
(written by `python -m mirage_xdsl.bench.suite.write`).  The `suite` group of `--workloads`
selects them all.

Sizes are those of LLM inference (Llama-2/3 7-8B: hidden 4096, head_dim 128, 32 query heads;
FFN 11008 for SwiGLU as in Llama-2-7B, 12288 = 3 x 4096 for GELU; a 32768-entry vocabulary);
`small` is the reduced size the CPU tests run on the host emulator.  fp32 only where the
program is not a matmul (normalisations, softmax, reductions, rotary, cross-entropy): the
matmul programs are tensor-core programs, fp16 and bf16.

Pure data: importing this module needs no xDSL and no torch (the GPU phase imports it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

DTYPE_TAGS = {"float16": "f16", "bfloat16": "bf16", "float32": "f32"}
"""dtype name -> the tag ending a workload's name."""

HALF = ("float16", "bfloat16")
ALL = ("float16", "bfloat16", "float32")


@dataclass(frozen=True)
class SuiteProgram:
    """One program of the suite and its size points."""

    program: str
    """builder name in graphs.py and torch program name in torch_programs.py"""
    points: tuple[tuple[str, dict[str, Any]], ...]
    """(name suffix, builder sizes) per size point"""
    small: dict[str, Any]
    """reduced sizes for the CPU tests (host emulator)"""
    dtypes: tuple[str, ...] = HALF
    stable: bool = False
    """a softmax/attention/cross-entropy: also checked with inputs scaled to scores of +-50"""
    notes: str = ""
    scaled_inputs: dict[str, float] = field(default_factory=dict)
    """input name -> magnitude for the scaled check (scores reach about +-50)"""


def _kv(n: int) -> str:
    return f"{n // 1024}k"


_DECODE_POINTS = tuple(
    (f"_g{g}_kv{_kv(kv)}", {"kv_heads": 32 // g, "group": g, "kv_len": kv, "head_dim": 128})
    for g, kv in ((1, 1024), (1, 32768), (8, 1024), (8, 8192), (8, 32768), (32, 1024), (32, 32768))
)

PROGRAMS: tuple[SuiteProgram, ...] = (
    SuiteProgram("softmax", (("", {"rows": 4096, "cols": 4096}),), {"rows": 16, "cols": 1024}, ALL, stable=True,
                 scaled_inputs={"X": 50.0}),
    SuiteProgram("layernorm", (("", {"rows": 4096, "cols": 4096}),), {"rows": 16, "cols": 1024}, ALL),
    SuiteProgram("rmsnorm", (("", {"rows": 4096, "cols": 4096}),), {"rows": 16, "cols": 1024}, ALL),
    SuiteProgram("add_rmsnorm", (("", {"rows": 4096, "cols": 4096}),), {"rows": 16, "cols": 1024}, ALL),
    SuiteProgram("gelu_mlp", tuple((f"_bs{b}", {"batch": b, "hidden": 4096, "ffn": 12288}) for b in (1, 16, 128)),
                 {"batch": 16, "hidden": 256, "ffn": 768}),
    SuiteProgram("swiglu_mlp", tuple((f"_bs{b}", {"batch": b, "hidden": 4096, "ffn": 11008}) for b in (1, 16, 128)),
                 {"batch": 16, "hidden": 256, "ffn": 688}),
    SuiteProgram("decode_attention", _DECODE_POINTS, {"kv_heads": 2, "group": 8, "kv_len": 1024, "head_dim": 128},
                 stable=True, scaled_inputs={"Q": 6.0, "K": 6.0}),
    SuiteProgram("prefill_attention", tuple((f"_s{s}", {"heads": 8, "seq": s, "head_dim": 128}) for s in (1024, 4096)),
                 {"heads": 2, "seq": 256, "head_dim": 128}, stable=True, scaled_inputs={"Q": 6.0, "K": 6.0},
                 notes="not causal"),
    SuiteProgram("prefill_attention_causal",
                 tuple((f"_s{s}", {"heads": 8, "seq": s, "head_dim": 128}) for s in (1024, 4096)),
                 {"heads": 2, "seq": 256, "head_dim": 128}, stable=True, scaled_inputs={"Q": 6.0, "K": 6.0},
                 notes="causal: kn.causal_mask on the scaled scores"),
    SuiteProgram("rotary", (("", {"tokens": 4096, "heads": 32, "head_dim": 128}),),
                 {"tokens": 64, "heads": 4, "head_dim": 128}, ALL),
    SuiteProgram("bmm_nt", (("", {"batch": 8, "m": 1024, "n": 1024, "k": 1024}),),
                 {"batch": 2, "m": 128, "n": 128, "k": 256}),
    SuiteProgram("reduce_sum", tuple((f"_d{d}", {"dim": d, "d0": 16, "d1": 1024, "d2": 4096}) for d in (0, 1, 2)),
                 {"dim": 1, "d0": 4, "d1": 64, "d2": 256}, ALL),
    SuiteProgram("lora", tuple((f"_r{r}", {"batch": 16, "hidden": 4096, "rank": r}) for r in (16, 64)),
                 {"batch": 16, "hidden": 256, "rank": 16}),
    SuiteProgram("cross_entropy", (("", {"rows": 1024, "vocab": 32768}),), {"rows": 16, "vocab": 4096}, ALL,
                 stable=True, scaled_inputs={"X": 50.0}),
)
BY_PROGRAM = {p.program: p for p in PROGRAMS}


@dataclass(frozen=True)
class SuiteWorkload:
    """One workload of the suite: a program at one size point in one dtype."""

    name: str
    program: str
    dtype: str
    sizes: dict[str, Any]

    @property
    def example(self) -> str:
        """Its plain kernel graph, relative to examples/."""
        return f"suite/{self.name}.mlir"


def _short(program: str) -> str:
    return {"decode_attention": "decode", "prefill_attention": "prefill", "prefill_attention_causal": "prefill_causal"}.get(
        program, program
    )


SUITE: tuple[SuiteWorkload, ...] = tuple(
    SuiteWorkload(f"suite_{_short(p.program)}{suffix}_{DTYPE_TAGS[dtype]}", p.program, dtype, sizes)
    for p in PROGRAMS
    for suffix, sizes in p.points
    for dtype in p.dtypes
)
"""Every workload of the suite, in table order."""
SUITE_BY_NAME = {w.name: w for w in SUITE}
