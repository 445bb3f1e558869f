"""Fuzzed Tensor Comprehensions files (examples/tc/ mutated, sizes lines included): compiling
them with `tc_file` raises only located one-line `TcError`s, never another exception."""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mirage_xdsl.frontends.tc import TcError, tc_file

TC_DIR = Path(__file__).resolve().parents[2] / "examples" / "tc"
FILES = sorted(p.name for p in TC_DIR.glob("*.tc"))

# ---------------------------------------------------------------------------------------
# Fuzzed files: only located TcErrors

TOKEN = re.compile(r"[ \t]+|\n|[A-Za-z_]\w*|\d+|.", re.S)  # comments split too: the sizes line gets mutated
VOCABULARY = ["# sizes: ", "#sizes:", "N=4", "D=0", "=", ",", "-1", "Q=2", "\n", "(", ")", "+=!", "=", "X", "d", "B", "half", "fmax"]


@st.composite
def mutated_files(draw: st.DrawFn) -> str:
    text = draw(st.sampled_from([(TC_DIR / n).read_text() for n in FILES]))
    tokens = TOKEN.findall(text)
    for _ in range(draw(st.integers(1, 4))):
        pos = draw(st.integers(0, len(tokens) - 1))
        kind = draw(st.sampled_from(["delete", "insert", "replace"]))
        if kind == "delete":
            del tokens[pos]
        elif kind == "insert":
            tokens.insert(pos, draw(st.sampled_from(VOCABULARY)))
        else:
            tokens[pos] = draw(st.sampled_from(VOCABULARY))
    return "".join(tokens)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_files())
def test_fuzzed_files_raise_only_tc_errors(source: str) -> None:
    try:
        tc_file(source, "f.tc")
    except TcError as err:
        assert "\n" not in str(err) and re.match(r"^f\.tc:\d+:\d+: error: ", str(err)), str(err)
