"""The `kn` / `tb` dialects as text: every chunk of the lit ops files verifies and round-trips
through both syntaxes, mirage-opt reports one clean line and exit status 1 on bad input, and
hypothesis-mutated IR text raises ParseError / VerifyException, never a crash (helpers in
test_dialects.py)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_dialects import (
    BAD_ACCUM_KIND,
    BAD_IRDL_TYPE,
    BAD_MATMUL,
    BAD_TB_GRAPH,
    FAST,
    VALID_CHUNKS,
    parse,
    parse_and_verify,
    print_op,
)
from xdsl.utils.exceptions import DiagnosticException, ParseError

# ---------------------------------------------------------------------------------------
# The lit ops files: every chunk verifies and round-trips through both syntaxes


@pytest.mark.parametrize("chunk", VALID_CHUNKS, ids=lambda c: re.search(r"func.func @(\w+)", c).group(1))
def test_ops_round_trip(chunk: str) -> None:
    module = parse_and_verify(chunk)
    custom = print_op(module)
    generic = print_op(module, generic=True)
    assert print_op(parse_and_verify(generic)) == custom
    assert print_op(parse_and_verify(custom), generic=True) == generic


# ---------------------------------------------------------------------------------------
# mirage-opt: one clean line on stderr, exit status 1


def run_mirage_opt(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    return subprocess.run(["mirage-opt", *args], capture_output=True, text=True, env=env, timeout=120)


@pytest.mark.parametrize(
    ("path", "message"),
    [
        (BAD_MATMUL, "mirage-opt: error: kn.matmul: contraction dims differ: lhs[-1] = 8 vs rhs[-2] = 4"),
        (BAD_TB_GRAPH, "mirage-opt: error: tb.input: dim 0 (size 6) is not divisible by grid_dim.x = 4"),
    ],
)
def test_cli_verify_error_is_one_line(path: Path, message: str) -> None:
    proc = run_mirage_opt(str(path))
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert proc.stderr.splitlines() == [message]


def test_cli_parse_error_is_clean() -> None:
    proc = run_mirage_opt(str(BAD_ACCUM_KIND))
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert "Traceback" not in proc.stderr
    assert proc.stderr.startswith("mirage-opt: error: ")
    assert "bad_accum_kind.mlir:6:27" in proc.stderr.splitlines()[0]
    assert "unknown accumulator kind 'red_ld_avg'" in proc.stderr


@pytest.mark.parametrize("path", [BAD_ACCUM_KIND, BAD_IRDL_TYPE], ids=["parse-error", "irdl-error"])
def test_cli_every_error_is_one_line(path: Path) -> None:
    proc = run_mirage_opt(str(path))
    assert proc.returncode == 1
    assert len(proc.stderr.splitlines()) == 1


def test_verify_diagnostics_exit_zero() -> None:
    proc = run_mirage_opt(str(BAD_MATMUL), "--verify-diagnostics")
    assert proc.returncode == 0
    assert proc.stdout.splitlines()[0] == "kn.matmul: contraction dims differ: lhs[-1] = 8 vs rhs[-2] = 4"


# ---------------------------------------------------------------------------------------
# Hypothesis: malformed IR text raises ParseError / VerifyException, never a crash

TOKEN = re.compile(r'"[^"\n]*"|\^\w+|%\w+|@\w+|-?\d+(?:\.\d+)?(?:e[+-]?\d+)?|[A-Za-z_][\w.]*|->|\S')
"""Tokens of the IR text.  Two xDSL 0.74 problems outside our dialects are kept out of reach:
block labels (`^bb0`) stay whole because xDSL raises ValueError for a label like `^0`, and
string literals stay whole because an unterminated `"` makes xDSL's string-literal regex
backtrack exponentially (the parse never ends)."""

REPLACEMENTS = [
    "0", "-1", "-2", "1", "2", "3", "5", "64", "4096", "1000000000000",
    "f16", "f32", "bf16", "i8", "i1", "index", "?", "x", ",", ":", "(", ")", "<", ">", "{", "}",
    "after_accum", "nored", "red_ld_sum", "redtox_ld_sum", "nored_rescale", "max",
    "tensor<4xf16>", "!tb.stensor<4xf16>", "!tb.stensor<4x1xf16, after_accum>", "array<i64: 1, 1>",
    "array<i64>", "array<f32: 1.5, 2.0, 1.0>", "0.5 : f32", "unit", '"nored"',
]  # fmt: skip

ALLOWED = (ParseError, DiagnosticException)


def mutate(text: str, edits: list[tuple[int, int, int, int]]) -> str:
    for op, pos, choice, other in edits:
        spans = [m.span() for m in TOKEN.finditer(text)]
        if not spans:
            break
        start, end = spans[pos % len(spans)]
        token = text[start:end]
        if op == 0:  # delete the token
            new = ""
        elif op == 1:  # duplicate it
            new = f" {token} {token} "
        elif op == 2 and re.fullmatch(r"-?\d+", token):  # change a number
            value = int(token)
            new = str([0, -1, -2, 1, 2, value + 1, value - 1, value * 2, value // 2, -value][choice % 10])
        elif op == 3:  # copy another token of the text here (swaps types, names, kinds)
            o_start, o_end = spans[other % len(spans)]
            new = f" {text[o_start:o_end]} "
        else:  # insert a foreign token
            new = f" {REPLACEMENTS[choice % len(REPLACEMENTS)]} "
        # (new tokens are spaced: `i64` + `1000000000000` would make xDSL build a
        # trillion-bit integer type and run out of memory)
        text = text[:start] + new + text[end:]
    return text


EDITS = st.lists(
    st.tuples(st.integers(0, 4), st.integers(0, 10_000), st.integers(0, 1000), st.integers(0, 10_000)),
    min_size=1,
    max_size=3,
)


def check_no_crash(text: str) -> None:
    try:
        parse_and_verify(text)
    except ALLOWED:
        pass


GENERIC_CHUNKS = [print_op(parse(c), generic=True) for c in VALID_CHUNKS]


@FAST
@given(chunk=st.sampled_from(VALID_CHUNKS), edits=EDITS)
def test_fuzz_custom_syntax(chunk: str, edits) -> None:
    check_no_crash(mutate(chunk, edits))


@FAST
@given(chunk=st.sampled_from(GENERIC_CHUNKS), edits=EDITS)
def test_fuzz_generic_syntax(chunk: str, edits) -> None:
    check_no_crash(mutate(chunk, edits))


NUMBER = re.compile(r"(?<![A-Za-wyz_%@^.\d+-])-?\d+(?=x|[^\w.])")
"""Integers of the IR, shape dims inside `4x8xf16` included (not `i64`, `%t1`, `^bb0` or floats)."""


@FAST
@given(
    chunk=st.sampled_from(VALID_CHUNKS + GENERIC_CHUNKS),
    picks=st.lists(st.tuples(st.integers(0, 10_000), st.integers(-3, 70_000)), min_size=1, max_size=4),
)
def test_fuzz_numbers(chunk: str, picks) -> None:
    """Change shape dims, map entries, grid sizes, dims and ranges to arbitrary integers."""
    for pos, value in picks:
        spans = [m.span() for m in NUMBER.finditer(chunk)]
        start, end = spans[pos % len(spans)]
        chunk = chunk[:start] + str(value) + chunk[end:]
    check_no_crash(chunk)


@pytest.mark.parametrize(
    "text",
    [
        # nested ops are verified before kn.customized: a malformed graph must not crash them
        'kn.customized(%x) attributes {grid_dim = array<i64: 2>, block_dim = array<i64: 1, 1, 1>, '
        "forloop_range = 0 : i64, reduction_dimx = 0 : i64}",
        "kn.customized(%x) attributes {block_dim = array<i64: 1, 1, 1>, forloop_range = 1 : i64}",
        'kn.customized(%x) attributes {grid_dim = 1 : i64, block_dim = "x", forloop_range = 1.0 : f32, '
        "reduction_dimx = 64 : i64}",
    ],
)
def test_malformed_graph_attributes_do_not_crash_nested_ops(text: str) -> None:
    ir = f"""
func.func @k(%X: tensor<8x64xf16>) {{
  {text.replace("%x", "%X")} : (tensor<8x64xf16>) -> () {{
  ^bb0(%x: tensor<8x64xf16>):
    %t = tb.input %x {{input_map = array<i64: 0, -1, -1>, forloop_dim = 1 : i64}} : tensor<8x64xf16> -> !tb.stensor<8x64xf16>
    %r = tb.reduction_to_dimx %t {{dim = 5 : i64}} : !tb.stensor<8x64xf16> -> !tb.stensor<8x64xf16>
    %a = tb.forloop_accum redtox_ld_sum %t : !tb.stensor<8x64xf16> -> !tb.stensor<8x64xf16, after_accum>
    tb.output %a {{output_map = array<i64: 0, -1, -1>}} : !tb.stensor<8x64xf16, after_accum>
  }}
  func.return
}}
"""
    with pytest.raises(ALLOWED):
        parse_and_verify(ir)
