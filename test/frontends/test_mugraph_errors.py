"""Saved-muGraph JSON frontend, its errors: located one-line messages for broken files (hand-made
mutations and hypothesis mutations of a saved file), and the `mirage-opt` command line on them
(`frontends/mugraph_import.py`; the import, export and eras themselves: test_mugraph.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_mugraph import MIRAGE_OPT, funcs, import_error, load

from mirage_xdsl.frontends.mugraph_import import import_mugraph
from mirage_xdsl.frontends.mugraph_schema import MugraphImportError

# ---------------------------------------------------------------------------------------
# errors


@pytest.fixture(scope="module")
def rms_text(mugraph_dir: Path) -> str:
    return (mugraph_dir / "rmsnorm_bs1.json").read_text()


def _mutated(text: str, fn) -> str:  # noqa: ANN001
    data = json.loads(text)
    fn(data)
    return json.dumps(data)


def test_error_tile_dim(rms_text: str) -> None:
    def bad(d: Any) -> None:
        d[3][2]["bgraph"]["operators"][0]["output_tensors"][0]["dim"][1] = 128

    msg = import_error(_mutated(rms_text, bad), name="/some/dir/rmsnorm_bs1.json")
    assert msg.startswith("rmsnorm_bs1.json: graph 3, op 2 (kn_customized_op), tb op 0 (tb_input_op): tile dim 1 (size 64)")
    assert "stored dims [2,128]" in msg


def test_error_output_dtensor(rms_text: str) -> None:
    def bad(d: Any) -> None:
        d[1][2]["bgraph"]["operators"][-1]["output_map"]["x"] = 0

    msg = import_error(_mutated(rms_text, bad))
    assert "graph 1, op 2 (kn_customized_op), tb op 6 (tb_output_op)" in msg and "output_map" in msg


def _div_before_accum(d: Any) -> None:
    """Graph 0: replace the nored accumulator by exp, consistently: tb.div then mixes a tile
    from inside the loop with one after it (caught by the final verification)."""
    ops = d[0][2]["bgraph"]["operators"]
    ops[4]["op_type"] = "tb_exp_op"
    ops[4]["output_tensors"][0]["after_accum"] = False
    ops[5]["input_tensors"][0]["after_accum"] = False
    ops[5]["output_tensors"][0]["after_accum"] = False
    ops[6]["input_tensors"][0]["after_accum"] = False


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda d: d[0][2].update(op_type="kn_frobnicate_op"), "graph 0, op 2 (kn_frobnicate_op): unknown"),
        (
            lambda d: d[0][2]["bgraph"]["operators"][3].update(op_type="tb_concat_then_matmul_op"),
            "tb op 3 (tb_concat_then_matmul_op): unknown or unsupported",
        ),
        (lambda d: d[0][2]["input_tensors"][1].update(guid=5), "references guid 5, which no earlier operator"),
        (lambda d: d[0][0]["output_tensors"][0].update(data_type=999), "unknown data_type 999 for era A"),
        (lambda d: d[0][2]["bgraph"]["operators"][5]["input_tensors"].pop(), "expects 2 input_tensors, got 1"),
        (lambda d: d[0][3]["input_tensors"][0]["dim"].__setitem__(1, 6000), "stored dims [2,6000]"),
        (lambda d: d[0][2]["bgraph"].update(forloop_range=0), "forloop_range = 0 is out of range"),
        (lambda d: d[0][2]["bgraph"].pop("grid_dim"), "has no field 'grid_dim'"),
        (lambda d: d[0][2]["bgraph"]["operators"].pop(0), "tb op 0 (tb_input_op): dtensor guid 10002241 differs"),
        (lambda d: d[0][2]["input_tensors"].pop(), "1 customized inputs"),
        (lambda d: d[0][2]["input_tensors"].append(d[0][2]["input_tensors"][0]), "2 tb_input_op operators for 3"),
        (lambda d: d[0][2]["output_tensors"][0].update(guid=42), "differs from customized output 0"),
        (
            lambda d: d[0][2]["bgraph"]["operators"][4].update(op_type="tb_exp_op"),
            "tb op 4 (tb_exp_op): output_tensors[0] (guid 20007105): stored after_accum = true",
        ),
        (_div_before_accum, "tb op 5 (tb_div_op): tb.div: operands must agree on after_accum"),
        (lambda d: d[0][0].update(input_strides=[1]), "'input_strides' has 1 entries for a rank-2 tensor"),
        (lambda d: d[0].append(d[0][0]), "guid 10002240 is already produced"),
        (lambda d: d[0][2]["bgraph"]["operators"][2].update(op_type="tb_accum_bogus_op"), "unknown accumulator"),
    ],
)
def test_error_messages(rms_text: str, mutate, expected: str) -> None:  # noqa: ANN001
    msg = import_error(_mutated(rms_text, mutate), name="rmsnorm_bs1.json")
    assert msg.startswith("rmsnorm_bs1.json: graph ")
    assert expected in msg, msg


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "malformed JSON"),
        ("[[{", "malformed JSON"),
        ('{"a": 1}', "top level must be a JSON array"),
        ("[1, 2]", "graph 0: a kernel graph must be a JSON array"),
        ("[[1]]", "graph 0, op 0 (?): an operator must be a JSON object"),
        ('[[{"x": 1}]]', "needs a string field 'op_type'"),
        ("[" * 100000, "malformed JSON"),
    ],
)
def test_error_malformed(text: str, expected: str) -> None:
    assert expected in import_error(text, name="t.json")


def test_empty_file_is_an_empty_module() -> None:
    assert len(funcs(import_mugraph("[]"))) == 0


# ---------------------------------------------------------------------------------------
# random mutations of a real file: only MugraphImportError may escape


@pytest.fixture(scope="module")
def lora_doc(mugraph_dir: Path) -> tuple[str, list[tuple[Any, ...]]]:
    text = (mugraph_dir / "lora.json").read_text()
    # keep two graphs: enough structure, fast to import
    base = json.dumps(json.loads(text)[:2])
    paths: list[tuple[Any, ...]] = []

    def walk(node: Any, path: tuple[Any, ...]) -> None:
        paths.append(path)
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, (*path, k))
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, (*path, i))

    walk(json.loads(base), ())
    return base, paths


def _get(node: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        node = node[key]
    return node


def _check_import(text: str) -> None:
    try:
        module = import_mugraph(text, name="mutated.json")
    except MugraphImportError as err:
        msg = str(err)
        assert "\n" not in msg and msg.startswith("mutated.json: "), msg
        assert "internal error" not in msg, msg
        return
    module.verify()


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)
OP_NAMES = st.sampled_from(
    [
        "kn_input_op",
        "kn_output_op",
        "kn_customized_op",
        "kn_matmul_op",
        "kn_exp_op",
        "kn_reduction_1_op",
        "kn_chunk_0_op",
        "kn_concat_1_op",
        "kn_rms_norm_op",
        "kn_allreduce_op",
        "tb_input_op",
        "tb_output_op",
        "tb_matmul_op",
        "tb_exp_op",
        "tb_mul_scalar_op",
        "tb_clamp_op",
        "tb_add_op",
        "tb_reduction_0_op",
        "tb_reduction_2_to_dimx_op",
        "tb_reduction_1_max_op",
        "tb_concat_0_op",
        "tb_accum_nored_op",
        "tb_forloop_accum_red_ld_sum_op",
        "tb_forloop_accum_nored_rescale_op",
        "tb_accum_max_op",
        "tb_split_0_op",
        "nonsense",
    ]
)
MUTATION_SETTINGS = settings(max_examples=50, deadline=None, suppress_health_check=list(HealthCheck))


@MUTATION_SETTINGS
@given(data=st.data())
def test_mutation_delete_key(lora_doc: tuple[str, list[tuple[Any, ...]]], data: st.DataObject) -> None:
    base, paths = lora_doc
    keyed = [p for p in paths if p and isinstance(p[-1], str)]
    path = data.draw(st.sampled_from(keyed))
    doc = json.loads(base)
    del _get(doc, path[:-1])[path[-1]]
    _check_import(json.dumps(doc))


@MUTATION_SETTINGS
@given(data=st.data())
def test_mutation_replace_value(lora_doc: tuple[str, list[tuple[Any, ...]]], data: st.DataObject) -> None:
    base, paths = lora_doc
    path = data.draw(st.sampled_from([p for p in paths if p]))
    doc = json.loads(base)
    _get(doc, path[:-1])[path[-1]] = data.draw(JSON_VALUES)
    _check_import(json.dumps(doc))


@MUTATION_SETTINGS
@given(data=st.data())
def test_mutation_op_type(lora_doc: tuple[str, list[tuple[Any, ...]]], data: st.DataObject) -> None:
    base, paths = lora_doc
    path = data.draw(st.sampled_from([p for p in paths if p and p[-1] == "op_type"]))
    doc = json.loads(base)
    _get(doc, path[:-1])["op_type"] = data.draw(OP_NAMES | st.text(max_size=12))
    _check_import(json.dumps(doc))


@MUTATION_SETTINGS
@given(data=st.data())
def test_mutation_dims_and_guids(lora_doc: tuple[str, list[tuple[Any, ...]]], data: st.DataObject) -> None:
    base, paths = lora_doc
    targets = [p for p in paths if p and p[-1] in ("guid", "num_dims", "forloop_dim", "forloop_range", "x", "y", "z")]
    targets += [p for p in paths if len(p) > 1 and p[-2] == "dim"]
    doc = json.loads(base)
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(targets))
        parent = _get(doc, path[:-1])
        parent[path[-1]] = data.draw(st.integers(-3, 5000) | st.sampled_from([0, 1, 2, 64, 10**30, -(10**30)]))
    _check_import(json.dumps(doc))


@MUTATION_SETTINGS
@given(data=st.data())
def test_mutation_truncate(lora_doc: tuple[str, list[tuple[Any, ...]]], data: st.DataObject) -> None:
    base, _ = lora_doc
    cut = data.draw(st.integers(0, len(base) - 1))
    _check_import(base[:cut])


# ---------------------------------------------------------------------------------------
# the command line


def run_cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    return subprocess.run([*MIRAGE_OPT, *args], input=stdin, capture_output=True, text=True, env=env, timeout=120)


def test_cli_import_and_round_trip(mugraph_dir: Path) -> None:
    proc = run_cli(str(mugraph_dir / "lora.json"), "-t", "mugraph")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)[0][0]["output_tensors"][0]["data_type"] == 940
    back = run_cli("-f", "mugraph", stdin=proc.stdout)
    assert back.returncode == 0, back.stderr
    assert back.stdout.strip() == str(load(mugraph_dir, "lora.json")[1]).strip()


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ('[[{"op_type": "kn_input_op"', "malformed JSON"),
        ('[[{"op_type": "kn_bogus_op", "input_tensors": [], "output_tensors": []}]]', "graph 0, op 0 (kn_bogus_op)"),
    ],
)
def test_cli_errors_are_one_line(tmp_path: Path, content: str, expected: str) -> None:
    path = tmp_path / "broken.json"
    path.write_text(content)
    proc = run_cli(str(path))
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("mirage-opt: error: broken.json: ") and expected in lines[0]


def test_cli_tile_error_and_era_flag(tmp_path: Path, mugraph_dir: Path) -> None:
    data = json.loads((mugraph_dir / "rmsnorm_bs1.json").read_text())
    data[3][2]["bgraph"]["operators"][0]["output_tensors"][0]["dim"][1] = 128
    path = tmp_path / "rmsnorm_bs1.json"
    path.write_text(json.dumps(data))
    proc = run_cli(str(path), "--mugraph-era=A")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().startswith(
        "mirage-opt: error: rmsnorm_bs1.json: graph 3, op 2 (kn_customized_op), tb op 0 (tb_input_op): tile dim 1"
    )
    assert len(proc.stderr.strip().splitlines()) == 1
