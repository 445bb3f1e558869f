"""Fuzz regression tests (issue #29): mutated IR and muGraph files through `mirage-opt`'s entry
point, and random arguments through the builder.

Every mutated input must end in exit code 0 or 1 within a time limit, with every stderr line
a user message `mirage-opt: error: ...` (no traceback, no Python object repr); the builder
may only raise `GraphBuildError`.  The runs are derandomized (the same examples every time)
and bounded, so the file stays well under a minute.  `MIRAGE_FUZZ_EXAMPLES=N` raises the
number of examples for a longer local hunt.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import signal
from pathlib import Path

import pytest
from conftest import MUGRAPH_FILES
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mirage_xdsl as mx
from mirage_xdsl.frontends.builder_common import GraphBuildError
from mirage_xdsl.tools.mirage_opt import main as mirage_opt_main

ROOT = Path(__file__).resolve().parents[2]
IR_SEEDS = sorted((ROOT / "examples").glob("*.mlir")) + sorted((ROOT / "test" / "data").glob("*.mlir"))
JSON_SEEDS = MUGRAPH_FILES + sorted((ROOT / "test" / "filecheck" / "frontend" / "Inputs").glob("*.json"))
EXAMPLES = int(os.environ.get("MIRAGE_FUZZ_EXAMPLES", "0"))
CASE_SECONDS = 20
"""Per-input time limit: a valid example transpiles in about a second."""

INTERESTING_INTS = [0, 1, -1, 2, 3, 7, 64, 4096, 4097, 65535, 2**31 - 1, 2**31, 2**32, 2**62, -(2**31)]
REPR = re.compile(r"<[^<>]* object at 0x[0-9a-f]+>")


class CaseTimeout(Exception):
    """A single input ran past CASE_SECONDS (the tool would hang for a user)."""


@contextlib.contextmanager
def time_limit(seconds: int):
    def expire(signum, frame):  # noqa: ANN001, ARG001 - signal handler signature
        raise CaseTimeout(f"ran past {seconds} s")

    old = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def run_opt(argv: list[str]) -> tuple[int, str]:
    """`mirage-opt argv` in this process: (exit code, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            mirage_opt_main(argv)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    return code, err.getvalue()


def assert_user_facing(code: int, stderr: str, what: str) -> None:
    assert code in (0, 1), f"{what}: exit code {code}\n{stderr}"
    assert "Traceback" not in stderr, f"{what}:\n{stderr}"
    assert not REPR.search(stderr), f"{what}: object repr in\n{stderr}"
    if code == 1:
        lines = stderr.strip().splitlines()
        assert lines and lines[0].startswith("mirage-opt: error: "), f"{what}:\n{stderr}"
        # xDSL's parse errors add the source line and a caret line under the first line
        assert len(lines[0]) > len("mirage-opt: error: ") + 3, f"{what}: empty message\n{stderr}"


# ---------------------------------------------------------------------------------------
# Mutations of text (IR and JSON alike) and of parsed JSON


def _mutate_text(data: st.DataObject, text: str) -> str:
    kind = data.draw(
        st.sampled_from(["int", "delete", "swap_lines", "dup_line", "nest", "chars", "drop_attr", "rename_use", "op_name"])
    )
    swaps = {
        "drop_attr": (r"\b[a-z_][\w.]* = (?:array<[^>]*>|\[[^\]]*\]|[^,}\n]+)(?:, )?", None),
        "rename_use": (r"%[\w.]+", r"%[\w.]+"),
        "op_name": (r"\b(?:kn|tb|func)\.[a-z_]+", r"\b(?:kn|tb|func)\.[a-z_]+"),
    }
    if kind in swaps:
        pattern, pool = swaps[kind]
        spots = [m.span() for m in re.finditer(pattern, text)]
        if spots:
            start, end = data.draw(st.sampled_from(spots))
            new = data.draw(st.sampled_from(sorted(set(re.findall(pool, text))))) if pool else ""
            return text[:start] + new + text[end:]
    if kind == "int":
        spots = [m.span() for m in re.finditer(r"-?\d+", text)]
        if spots:
            start, end = data.draw(st.sampled_from(spots))
            value = data.draw(st.sampled_from(INTERESTING_INTS) | st.integers(-(2**63), 2**63))
            return text[:start] + str(value) + text[end:]
    if kind == "delete" and text:
        start = data.draw(st.integers(0, len(text) - 1))
        length = data.draw(st.integers(1, 40))
        return text[:start] + text[start + length :]
    lines = text.splitlines()
    if kind in ("swap_lines", "dup_line") and len(lines) > 2:
        i = data.draw(st.integers(0, len(lines) - 1))
        j = data.draw(st.integers(0, len(lines) - 1))
        if kind == "swap_lines":
            lines[i], lines[j] = lines[j], lines[i]
        else:
            lines.insert(j, lines[i])
        return "\n".join(lines)
    if kind == "nest":
        depth = data.draw(st.sampled_from([50, 400, 2000]))
        opener = data.draw(st.sampled_from(["[", "(", "{", "tensor<"]))
        start = data.draw(st.integers(0, len(text)))
        return text[:start] + opener * depth + text[start:]
    pos = data.draw(st.integers(0, len(text)))
    junk = data.draw(st.text(alphabet="%^@#[](){}<>:,=-0123456789xf ", min_size=1, max_size=8))
    return text[:pos] + junk + text[pos:]


def _paths(node: object, path: tuple = ()) -> list[tuple]:
    """Every path (keys/indices) into a parsed JSON value, capped for big files."""
    out = [path]
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, (*path, k))
    elif isinstance(node, list):
        for i, v in enumerate(node[:6]):
            out += _paths(v, (*path, i))
    return out


def _mutate_json(data: st.DataObject, doc: object) -> object:
    paths = [p for p in _paths(doc) if p]
    path = data.draw(st.sampled_from(paths))
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    key = path[-1]
    kind = data.draw(st.sampled_from(["delete", "retype", "int", "nest"]))
    if kind == "delete":
        del parent[key]
    elif kind == "retype":
        parent[key] = data.draw(st.sampled_from([None, True, "x", 2.5, [], {}, [[1]], {"a": 1}]))
    elif kind == "int":
        parent[key] = data.draw(st.sampled_from(INTERESTING_INTS))
    else:
        value: object = parent[key]
        for _ in range(data.draw(st.sampled_from([30, 300, 1500]))):
            value = [value]
        parent[key] = value
    return doc


def _settings(default: int):  # noqa: ANN202 - hypothesis settings object
    return settings(
        max_examples=EXAMPLES or default,
        derandomize=True,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )


@pytest.mark.skipif(not IR_SEEDS, reason="no IR seed files")
@_settings(120)
@given(data=st.data())
def test_mutated_ir_gives_user_errors(tmp_path_factory: pytest.TempPathFactory, data: st.DataObject) -> None:
    seed = data.draw(st.sampled_from(IR_SEEDS), label="seed")
    text = _mutate_text(data, seed.read_text())
    passes = data.draw(st.sampled_from([[], [], ["-p", "kn-fuse"], ["-p", "mirage-transpile", "-t", "cuda"]]))
    path = tmp_path_factory.mktemp("ir") / seed.name
    path.write_text(text)
    with time_limit(CASE_SECONDS):
        code, stderr = run_opt([str(path), *passes])
    assert_user_facing(code, stderr, f"{seed.name} {passes}")


@pytest.mark.skipif(not JSON_SEEDS, reason="no muGraph seed files")
@_settings(80)
@given(data=st.data())
def test_mutated_mugraph_gives_user_errors(tmp_path_factory: pytest.TempPathFactory, data: st.DataObject) -> None:
    seed = data.draw(st.sampled_from(JSON_SEEDS), label="seed")
    text = seed.read_text()
    if data.draw(st.booleans(), label="structural"):
        text = json.dumps(_mutate_json(data, json.loads(text)))
    else:
        text = _mutate_text(data, text)
    path = tmp_path_factory.mktemp("json") / seed.name
    path.write_text(text)
    with time_limit(CASE_SECONDS):
        code, stderr = run_opt([str(path)])
    assert_user_facing(code, stderr, seed.name)


# ---------------------------------------------------------------------------------------
# The builder: random argument types give GraphBuildError or a graph, nothing else

ANY_ARG = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 5000),
    st.sampled_from([2**31, 2**62, -(2**31)]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=6),
    st.sampled_from(["float16", "bf16", "float32", "int8", "torch.float16"]),
    st.lists(st.one_of(st.integers(-2, 300), st.booleans(), st.floats(0, 10), st.text(max_size=2)), max_size=5),
    st.tuples(st.integers(1, 256), st.integers(1, 256)),
)


def _mostly(valid: object) -> st.SearchStrategy:
    """`valid` two times in three, else any argument: later builder calls get exercised too."""
    return st.one_of(st.just(valid), st.just(valid), ANY_ARG)


@_settings(200)
@given(
    dims=_mostly((64, 256)),
    dtype=_mostly("float16"),
    strides=_mostly(None),
    out_strides=_mostly(None),
    grid=_mostly((4, 1, 1)),
    forloop=_mostly(4),
    imap=_mostly((1, -1, -1)),
    fdim=_mostly(1),
    omap=_mostly((1, -1, -1)),
    acc=_mostly(None),
    scalar=_mostly(0.5),
)
def test_builder_arguments_give_graph_build_errors(  # noqa: ANN001
    dims, dtype, strides, out_strides, grid, forloop, imap, fdim, omap, acc, scalar
) -> None:
    with time_limit(CASE_SECONDS):
        try:
            g = mx.new_kernel_graph()
            X = g.new_input(dims, strides=strides, dtype=dtype)
            g.mark_output(g.mul_scalar(g.exp(X), scalar), strides=out_strides)
            tbg = mx.new_threadblock_graph(grid_dim=grid, forloop_range=forloop)
            tx = tbg.new_input(X, input_map=imap, forloop_dim=fdim)
            tbg.new_output(tbg.forloop_accum(tbg.mul_scalar(tx, scalar), acc), output_map=omap)
            (O,) = g.customized([X], tbg)
            g.mark_output(O)
            g.module  # noqa: B018 - builds and verifies the module
        except GraphBuildError as err:
            assert str(err) and not REPR.search(str(err)), str(err)


def test_builder_refuses_floats_and_bools_as_sizes() -> None:
    g = mx.new_kernel_graph()
    with pytest.raises(GraphBuildError, match=r"^new_input: dims must be a list or tuple of ints, got \(2\.5, 4\)"):
        g.new_input((2.5, 4))
    with pytest.raises(GraphBuildError, match=r"^new_input: dims must be a list or tuple of ints, got \(True, 4\)"):
        g.new_input((True, 4))
    with pytest.raises(GraphBuildError, match=r"^new_input: unknown dtype 'int3'"):
        g.new_input((2, 4), dtype="int3")
    with pytest.raises(GraphBuildError, match=r"^new_threadblock_graph: forloop_range must be in \[1, 4096\], got 65536"):
        mx.new_threadblock_graph((1, 1, 1), forloop_range=65536)
    X = g.new_input((8, 8))
    with pytest.raises(GraphBuildError, match=r"^mark_output: strides \[0, 1\] lets distinct elements"):
        g.mark_output(g.exp(X), strides=(0, 1))


# ---------------------------------------------------------------------------------------
# One regression test per failure class of issue #29 item 3


def _write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def _one_error(argv: list[str]) -> str:
    with time_limit(CASE_SECONDS):
        code, stderr = run_opt(argv)
    assert_user_facing(code, stderr, " ".join(argv))
    assert code == 1, stderr
    return stderr.strip().splitlines()[0]


def test_divisors_by_factorisation_match_trial_division() -> None:
    from mirage_xdsl.passes.conversion.default_tb_graph import _divisors

    for n in [*range(1, 300), 4096, 6144, 9973 * 2, 2**20 * 3]:
        assert _divisors(n) == [d for d in range(1, n + 1) if n % d == 0], n
    assert _divisors(2**31 - 1) == [1, 2**31 - 1]  # a prime: sqrt(n) trial steps, not n
    assert len(_divisors(2**30)) == 31


def test_kn_fuse_on_a_billion_rows_finishes(tmp_path: Path) -> None:
    """kn-fuse used to try every divisor up to the dim (2^31 rows ran past 60 s)."""
    rows = 2**30
    text = (
        f"func.func @f(%X: tensor<{rows}x1xf16>) -> tensor<{rows}x1xf16> {{\n"
        f"  %a = kn.exp %X : tensor<{rows}x1xf16>\n  %b = kn.sqrt %a : tensor<{rows}x1xf16>\n"
        f"  func.return %b : tensor<{rows}x1xf16>\n}}\n"
    )
    with time_limit(CASE_SECONDS):
        code, stderr = run_opt([_write(tmp_path, "rows.mlir", text), "-p", "kn-fuse"])
    assert code == 0, stderr


def test_tensor_of_2e31_elements_is_refused(tmp_path: Path) -> None:
    text = "func.func @f(%X: tensor<2147483648x1xf16>) -> tensor<2147483648x1xf16> {\n  func.return %X : tensor<2147483648x1xf16>\n}\n"
    line = _one_error([_write(tmp_path, "big.mlir", text), "-p", "kn-fuse"])
    assert "argument #0: has type tensor<2147483648x1xf16> with 2147483648 elements, more than the 2147483647" in line


def test_mugraph_forloop_range_beyond_the_bound_is_refused(tmp_path: Path, mugraph_dir: Path) -> None:
    text = (mugraph_dir / "rmsnorm_bs1.json").read_text().replace('"forloop_range":32', '"forloop_range":2147483647', 1)
    line = _one_error([_write(tmp_path, "loop.json", text)])
    assert "forloop_range = 2147483647 exceeds 4096" in line


def test_mugraph_overlapping_output_strides_are_refused(tmp_path: Path, mugraph_dir: Path) -> None:
    doc = json.loads((mugraph_dir / "rmsnorm_bs1.json").read_text())
    out = next(op for op in doc[0] if op["op_type"] == "kn_output_op")
    out["output_strides"] = [0, 1]
    line = _one_error([_write(tmp_path, "strides.json", json.dumps(doc))])
    assert "graph 0: @graph_0: result #0: kn.strides = [0, 1] lets distinct elements of this output share an address" in line


def test_deeply_nested_json_is_refused_with_a_location(tmp_path: Path) -> None:
    line = _one_error([_write(tmp_path, "deep.json", "[" * 400 + "]" * 400)])
    assert line.startswith("mirage-opt: error: ") and "deep.json:1:33: " in line
    assert "brackets nest deeper than 32 levels" in line


def test_internal_errors_are_sentences() -> None:
    from mirage_xdsl.tools.mirage_opt import _internal_error

    text = _internal_error(KeyError(0), ["in.mlir", "-p", "kn-fuse"])
    assert text.startswith("in.mlir: internal error (KeyError: 0);") and "report" in text
    assert "nests too deeply" in _internal_error(RecursionError("maximum recursion depth exceeded"), ["in.mlir"])


def test_reference_executor_at_the_loop_bound_is_fast() -> None:
    """forloop_range is bounded so that the per-iteration reference loop stays in seconds."""
    import time

    import numpy as np

    from mirage_xdsl.target.device import MAX_FORLOOP_RANGE

    g = mx.new_kernel_graph()
    K = MAX_FORLOOP_RANGE * 16
    X, W = g.new_input((16, K)), g.new_input((K, 64))
    t = mx.new_threadblock_graph(grid_dim=(4, 1, 1), forloop_range=MAX_FORLOOP_RANGE)
    tX = t.new_input(X, input_map=(-1, -1, -1), forloop_dim=1)
    tW = t.new_input(W, input_map=(1, -1, -1), forloop_dim=0)
    t.new_output(t.div(t.forloop_accum(t.matmul(tX, tW)), t.forloop_accum(tX, "rms")), output_map=(1, -1, -1))
    (O,) = g.customized([X, W], t)
    g.mark_output(O)
    rng = np.random.default_rng(0)
    start = time.monotonic()
    g([rng.standard_normal((16, K)), rng.standard_normal((K, 64))])
    assert time.monotonic() - start < 10
