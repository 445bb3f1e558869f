"""Saved-muGraph JSON frontend (`frontends/mugraph_import.py`, `mugraph_export.py`) and `-t mugraph` target."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from xdsl.dialects.builtin import ModuleOp, TensorType, bf16, f16, f64
from xdsl.dialects.func import FuncOp
from xdsl.parser import Parser

from mirage_xdsl.dialects import kn, tb
from mirage_xdsl.dialects.tb import STensorType
from mirage_xdsl.driver.compile import make_context
from mirage_xdsl.frontends.mugraph_export import export_mugraph
from mirage_xdsl.frontends.mugraph_import import import_mugraph, load_mugraph_file
from mirage_xdsl.frontends.mugraph_schema import MugraphExportError, MugraphImportError, detect_era

GRAPH_COUNTS = {
    "gated_mlp.json": 32,
    "gqa_bs1.json": 28,
    "gqa_bs8.json": 10,
    "lora.json": 4,
    "rmsnorm_bs1.json": 18,
    "rmsnorm_bs8.json": 20,
}
FILES = sorted(GRAPH_COUNTS)
MIRAGE_OPT = [sys.executable, "-c", "from mirage_xdsl.tools.mirage_opt import main; main()"]

# Every kn/tb op the frontend maps, every accumulator kind, every dtype (hand-written IR).
ALL_OPS_MLIR = """
builtin.module {
  func.func @graph_0(%0: tensor<8x64xf32> {kn.strides = array<i64: 64, 1>}, %1: tensor<64x128xf32> {kn.strides = array<i64: 1, 64>}) -> (tensor<8x128xf32>, tensor<8x128xf32> {kn.strides = array<i64: 128, 1>}, tensor<8x64xf32>, tensor<8x256xf32>, tensor<8x64xf32>) {
    %e = kn.exp %0 : tensor<8x64xf32>
    %s = kn.mul_scalar %e {scalar = 0.125 : f64} : tensor<8x64xf32>
    %c = kn.clamp %s {min_value = -1.5 : f64, max_value = 2.0 : f64} : tensor<8x64xf32>
    %u1 = kn.square %c : tensor<8x64xf32>
    %u2 = kn.sqrt %u1 : tensor<8x64xf32>
    %u3 = kn.silu %u2 : tensor<8x64xf32>
    %u4 = kn.sigmoid %u3 : tensor<8x64xf32>
    %u5 = kn.gelu %u4 : tensor<8x64xf32>
    %u6 = kn.relu %u5 : tensor<8x64xf32>
    %u7 = kn.log %u6 : tensor<8x64xf32>
    %m = kn.matmul %u7, %1 : tensor<8x64xf32>, tensor<64x128xf32> -> tensor<8x128xf32>
    %r = kn.reduction %m {dim = 1 : i64, size = 1 : i64} : tensor<8x128xf32> -> tensor<8x1xf32>
    %r2 = kn.reduction %m {dim = 1 : i64, size = 64 : i64} : tensor<8x128xf32> -> tensor<8x64xf32>
    %n = kn.rms_norm %m {normalized_shape = array<i64: 128>} : tensor<8x128xf32>
    %cat = kn.concat %m, %n {dim = 0 : i64} : tensor<8x128xf32>, tensor<8x128xf32> -> tensor<16x128xf32>
    %ch0, %ch1 = kn.chunk %cat {dim = 0 : i64} : tensor<16x128xf32> -> tensor<8x128xf32>, tensor<8x128xf32>
    %ar = kn.all_reduce %ch0 {inplace} : tensor<8x128xf32>
    %ar2 = kn.all_reduce %ch1 : tensor<8x128xf32>
    %b1 = kn.add %ar, %r : tensor<8x128xf32>, tensor<8x1xf32> -> tensor<8x128xf32>
    %b2 = kn.sub %b1, %ar2 : tensor<8x128xf32>, tensor<8x128xf32> -> tensor<8x128xf32>
    %b3 = kn.mul %b2, %b2 : tensor<8x128xf32>, tensor<8x128xf32> -> tensor<8x128xf32>
    %b4 = kn.div %b3, %r : tensor<8x128xf32>, tensor<8x1xf32> -> tensor<8x128xf32>
    %b5 = kn.pow %b4, %b3 : tensor<8x128xf32>, tensor<8x128xf32> -> tensor<8x128xf32>
    %o1, %o2 = kn.customized(%0, %1) attributes {grid_dim = array<i64: 2, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 2 : i64, reduction_dimx = 32 : i64} : (tensor<8x64xf32>, tensor<64x128xf32>) -> (tensor<8x128xf32>, tensor<8x256xf32>) {
    ^bb0(%x: tensor<8x64xf32>, %w: tensor<64x128xf32>):
      %tx = tb.input %x {input_map = array<i64: -1, -1, -1>, forloop_dim = 1 : i64} : tensor<8x64xf32> -> !tb.stensor<8x32xf32>
      %tw = tb.input %w {input_map = array<i64: 1, -1, -1>, forloop_dim = 0 : i64} : tensor<64x128xf32> -> !tb.stensor<32x64xf32>
      %mm = tb.matmul %tx, %tw : !tb.stensor<8x32xf32>, !tb.stensor<32x64xf32> -> !tb.stensor<8x64xf32>
      %t1 = tb.exp %mm : !tb.stensor<8x64xf32>
      %t2 = tb.square %t1 : !tb.stensor<8x64xf32>
      %t3 = tb.sqrt %t2 : !tb.stensor<8x64xf32>
      %t4 = tb.silu %t3 : !tb.stensor<8x64xf32>
      %t5 = tb.sigmoid %t4 : !tb.stensor<8x64xf32>
      %t6 = tb.gelu %t5 : !tb.stensor<8x64xf32>
      %t7 = tb.relu %t6 : !tb.stensor<8x64xf32>
      %t8 = tb.log %t7 : !tb.stensor<8x64xf32>
      %t9 = tb.clamp %t8 {min_value = 0.25 : f64, max_value = 4.0 : f64} : !tb.stensor<8x64xf32>
      %t10 = tb.mul_scalar %t9 {scalar = -3.5 : f64} : !tb.stensor<8x64xf32>
      %t11 = tb.rms_norm %t10 : !tb.stensor<8x64xf32>
      %rd = tb.reduction %t11 {dim = 1 : i64} : !tb.stensor<8x64xf32> -> !tb.stensor<8x1xf32>
      %rx = tb.reduction_to_dimx %t11 {dim = 1 : i64} : !tb.stensor<8x64xf32> -> !tb.stensor<8x32xf32>
      %mx, %df = tb.reduction_max %t11 {dim = 1 : i64} : !tb.stensor<8x64xf32> -> !tb.stensor<8x1xf32>, !tb.stensor<8x1xf32>
      %ct = tb.concat %t11, %t11 {dim = 1 : i64} : !tb.stensor<8x64xf32>, !tb.stensor<8x64xf32> -> !tb.stensor<8x128xf32>
      %a1 = tb.add %t11, %rd : !tb.stensor<8x64xf32>, !tb.stensor<8x1xf32> -> !tb.stensor<8x64xf32>
      %a2 = tb.sub %a1, %mx : !tb.stensor<8x64xf32>, !tb.stensor<8x1xf32> -> !tb.stensor<8x64xf32>
      %a3 = tb.mul %a2, %df : !tb.stensor<8x64xf32>, !tb.stensor<8x1xf32> -> !tb.stensor<8x64xf32>
      %a4 = tb.div %a3, %a2 : !tb.stensor<8x64xf32>, !tb.stensor<8x64xf32> -> !tb.stensor<8x64xf32>
      %a5 = tb.pow %a4, %a1 : !tb.stensor<8x64xf32>, !tb.stensor<8x64xf32> -> !tb.stensor<8x64xf32>
      %k1 = tb.forloop_accum nored %a5 : !tb.stensor<8x64xf32> -> !tb.stensor<8x64xf32, after_accum>
      %k2 = tb.forloop_accum red_ld_sum %a5 : !tb.stensor<8x64xf32> -> !tb.stensor<8x1xf32, after_accum>
      %k3 = tb.forloop_accum red_ld_mean %a5 : !tb.stensor<8x64xf32> -> !tb.stensor<8x1xf32, after_accum>
      %k4 = tb.forloop_accum red_ld_rms %a5 : !tb.stensor<8x64xf32> -> !tb.stensor<8x1xf32, after_accum>
      %k5 = tb.forloop_accum redtox_ld_sum %a5 : !tb.stensor<8x64xf32> -> !tb.stensor<8x32xf32, after_accum>
      %k6 = tb.forloop_accum nored_rescale %a5, %df : !tb.stensor<8x64xf32>, !tb.stensor<8x1xf32> -> !tb.stensor<8x64xf32, after_accum>
      %k7 = tb.forloop_accum red_ld_sum_rescale %a5, %df : !tb.stensor<8x64xf32>, !tb.stensor<8x1xf32> -> !tb.stensor<8x1xf32, after_accum>
      %k8 = tb.forloop_accum max %a5 : !tb.stensor<8x64xf32> -> !tb.stensor<8x64xf32, after_accum>
      %k9 = tb.forloop_accum nored %ct : !tb.stensor<8x128xf32> -> !tb.stensor<8x128xf32, after_accum>
      %p1 = tb.add %k1, %k2 : !tb.stensor<8x64xf32, after_accum>, !tb.stensor<8x1xf32, after_accum> -> !tb.stensor<8x64xf32, after_accum>
      %p2 = tb.mul %p1, %k3 : !tb.stensor<8x64xf32, after_accum>, !tb.stensor<8x1xf32, after_accum> -> !tb.stensor<8x64xf32, after_accum>
      %p3 = tb.div %p2, %k4 : !tb.stensor<8x64xf32, after_accum>, !tb.stensor<8x1xf32, after_accum> -> !tb.stensor<8x64xf32, after_accum>
      %p4 = tb.add %p3, %k6 : !tb.stensor<8x64xf32, after_accum>, !tb.stensor<8x64xf32, after_accum> -> !tb.stensor<8x64xf32, after_accum>
      %p5 = tb.sub %p4, %k7 : !tb.stensor<8x64xf32, after_accum>, !tb.stensor<8x1xf32, after_accum> -> !tb.stensor<8x64xf32, after_accum>
      %p6 = tb.add %p5, %k8 : !tb.stensor<8x64xf32, after_accum>, !tb.stensor<8x64xf32, after_accum> -> !tb.stensor<8x64xf32, after_accum>
      %p7 = tb.reduction %k5 {dim = 1 : i64} : !tb.stensor<8x32xf32, after_accum> -> !tb.stensor<8x1xf32, after_accum>
      %p8 = tb.sub %p6, %p7 : !tb.stensor<8x64xf32, after_accum>, !tb.stensor<8x1xf32, after_accum> -> !tb.stensor<8x64xf32, after_accum>
      tb.output %p8 {output_map = array<i64: 1, -1, -1>} : !tb.stensor<8x64xf32, after_accum>
      tb.output %k9 {output_map = array<i64: 1, -1, -1>} : !tb.stensor<8x128xf32, after_accum>
    }
    func.return %b5, %o1, %r2, %o2, %0 : tensor<8x128xf32>, tensor<8x128xf32>, tensor<8x64xf32>, tensor<8x256xf32>, tensor<8x64xf32>
  }
  func.func @graph_1(%0: tensor<4x8xbf16> {kn.strides = array<i64: 8, 1>}, %1: tensor<4x8xf64> {kn.strides = array<i64: 8, 1>}, %2: tensor<4x8xi8> {kn.strides = array<i64: 8, 1>}, %3: tensor<4x8xui16> {kn.strides = array<i64: 8, 1>}, %4: tensor<4x8xf16> {kn.strides = array<i64: 8, 1>}) -> (tensor<4x8xbf16>, tensor<4x8xf64>, tensor<4x8xi8>, tensor<4x8xui16>, tensor<4x8xf16>) {
    func.return %0, %1, %2, %3, %4 : tensor<4x8xbf16>, tensor<4x8xf64>, tensor<4x8xi8>, tensor<4x8xui16>, tensor<4x8xf16>
  }
}
"""


# ---------------------------------------------------------------------------------------
# helpers


def parse(text: str) -> ModuleOp:
    return Parser(make_context(), text).parse_module()


def strip_names(module: ModuleOp) -> ModuleOp:
    """Drop SSA name hints so that printed modules compare structurally."""
    for op in module.walk():
        for res in op.results:
            res.name_hint = None
        for region in op.regions:
            for block in region.blocks:
                for arg in block.args:
                    arg.name_hint = None
    return module


def funcs(module: ModuleOp) -> list[FuncOp]:
    return [op for op in module.ops if isinstance(op, FuncOp)]


_CACHE: dict[str, tuple[str, ModuleOp]] = {}


def load(mugraph_dir: Path, name: str) -> tuple[str, ModuleOp]:
    """(file text, imported module), imported once per session."""
    if name not in _CACHE:
        text = (mugraph_dir / name).read_text()
        _CACHE[name] = (text, import_mugraph(text, name=name))
    return _CACHE[name]


def import_error(text: str, **kwargs: Any) -> str:
    with pytest.raises(MugraphImportError) as info:
        import_mugraph(text, **kwargs)
    msg = str(info.value)
    assert "\n" not in msg, msg
    return msg


# ---------------------------------------------------------------------------------------
# the shared files


@pytest.mark.parametrize("name", FILES)
def test_import_and_verify(mugraph_dir: Path, name: str) -> None:
    _, module = load(mugraph_dir, name)
    module.verify()
    graphs = funcs(module)
    assert len(graphs) == GRAPH_COUNTS[name]
    assert [g.sym_name.data for g in graphs] == [f"graph_{i}" for i in range(len(graphs))]
    for g in graphs:
        assert any(isinstance(op, kn.CustomizedOp) for op in g.body.block.ops)


def test_all_112_candidates(mugraph_dir: Path) -> None:
    total = sum(len(funcs(load(mugraph_dir, name)[1])) for name in FILES)
    assert total == 112 == sum(GRAPH_COUNTS.values())


def test_load_mugraph_file(mugraph_dir: Path) -> None:
    module = load_mugraph_file(mugraph_dir / "lora.json")
    assert len(funcs(module)) == 4
    with pytest.raises(MugraphImportError, match="cannot read"):
        load_mugraph_file(mugraph_dir / "does_not_exist.json")


def test_rmsnorm_graph0_decoded(mugraph_dir: Path) -> None:
    """mirage-notes 2.3, worked example."""
    graph = funcs(load(mugraph_dir, "rmsnorm_bs1.json")[1])[0]
    x, w = graph.body.block.args
    assert x.type == TensorType(f16, [2, 4096]) and w.type == TensorType(f16, [4096, 6144])
    assert [kn.ints(graph.arg_attrs.data[i].data[kn.STRIDES_ATTR]) for i in range(2)] == [(4096, 1), (6144, 1)]
    assert kn.ints(graph.res_attrs.data[0].data[kn.STRIDES_ATTR]) == (6144, 1)
    (cust,) = [op for op in graph.body.block.ops if isinstance(op, kn.CustomizedOp)]
    assert cust.grid == (256, 1, 1) and cust.block == (128, 1, 1)
    assert cust.num_iterations == 32 and cust.dimx == 64
    ops = list(cust.body.block.ops)
    assert [op.name for op in ops] == [
        "tb.input",
        "tb.input",
        "tb.forloop_accum",
        "tb.matmul",
        "tb.forloop_accum",
        "tb.div",
        "tb.output",
    ]
    t1, t2, t3, t4, t5, t6, out = ops
    assert t1.dtensor is cust.body.block.args[0] and t2.dtensor is cust.body.block.args[1]
    assert t1.result.type == STensorType([2, 128], f16) and t1.imap == (-1, -1, -1) and t1.fdim == 1
    assert t2.result.type == STensorType([128, 24], f16) and t2.imap == (1, -1, -1) and t2.fdim == 0
    assert t3.accum_kind == "red_ld_rms" and t3.result.type == STensorType([2, 1], f16, True)
    assert t5.accum_kind == "nored" and t5.result.type == STensorType([2, 24], f16, True)
    assert t6.lhs is t5.result and t6.rhs is t3.result
    assert out.input is t6.result and out.omap == (1, -1, -1)
    assert cust.outputs[0].type == TensorType(f16, [2, 6144])


@pytest.mark.parametrize("name", FILES)
def test_json_ir_json_ir_identity(mugraph_dir: Path, name: str) -> None:
    _, module = load(mugraph_dir, name)
    exported = export_mugraph(module)
    assert "921" not in re.findall(r'"data_type": (\d+)', exported)
    assert "tb_accum_" not in exported
    data = json.loads(exported)
    assert len(data) == GRAPH_COUNTS[name]
    again = import_mugraph(exported, name="exported.json")
    assert str(again) == str(module)
    # the exporter is deterministic: IR -> JSON is a function of the IR
    assert export_mugraph(again) == exported


def test_export_format(mugraph_dir: Path) -> None:
    _, module = load(mugraph_dir, "rmsnorm_bs1.json")
    graph0 = json.loads(export_mugraph(module))[0]
    assert [op["op_type"] for op in graph0] == ["kn_input_op", "kn_input_op", "kn_customized_op", "kn_output_op"]
    x = graph0[0]["output_tensors"][0]
    assert x == {"data_type": 940, "dim": [2, 4096, 0, 0], "guid": 10000000, "layout": "DmemRowMajor", "num_dims": 2}
    assert graph0[0]["input_strides"] == [4096, 1]
    bgraph = graph0[2]["bgraph"]
    assert bgraph["grid_dim"] == {"x": 256, "y": 1, "z": 1} and bgraph["forloop_range"] == 32
    tb_ops = bgraph["operators"]
    assert [op["op_type"] for op in tb_ops] == [
        "tb_input_op",
        "tb_input_op",
        "tb_forloop_accum_red_ld_rms_op",
        "tb_matmul_op",
        "tb_forloop_accum_nored_op",
        "tb_div_op",
        "tb_output_op",
    ]
    tile = tb_ops[0]["output_tensors"][0]
    assert tile == {
        "after_accum": False,
        "data_type": 940,
        "dim": [2, 128, 0, 0],
        "guid": 20000000,
        "layout": "SmemRowMajor",
        "num_dims": 2,
        "smem_offset": 0,
    }
    assert tb_ops[0]["dtensor"]["guid"] == graph0[2]["input_tensors"][0]["guid"] == 10000000
    assert tb_ops[6]["dtensor"]["guid"] == graph0[2]["output_tensors"][0]["guid"]
    assert graph0[3]["output_strides"] == [6144, 1]


@pytest.mark.parametrize("name", FILES)
def test_text_round_trip(mugraph_dir: Path, name: str) -> None:
    _, module = load(mugraph_dir, name)
    printed = str(module)
    reparsed = parse(printed)
    reparsed.verify()
    assert str(reparsed) == printed


# ---------------------------------------------------------------------------------------
# eras


def rewrite_era_c(node: Any) -> Any:
    """An era-A file rewritten in era-C spelling (921 -> 940, tb_accum_* -> tb_forloop_accum_*)."""
    if isinstance(node, list):
        return [rewrite_era_c(v) for v in node]
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            if key == "data_type" and value == 921:
                value = 940
            elif key == "op_type" and value.startswith("tb_accum_"):
                value = "tb_forloop_accum_" + value[len("tb_accum_") :]
            out[key] = rewrite_era_c(value)
        return out
    return node


@pytest.mark.parametrize("name", ["rmsnorm_bs1.json", "gqa_bs8.json"])
def test_era_c_rewrite_imports_identically(mugraph_dir: Path, name: str) -> None:
    text, module = load(mugraph_dir, name)
    era_c = json.dumps(rewrite_era_c(json.loads(text)))
    assert detect_era(text) == "A" and detect_era(era_c) == "C"
    assert str(import_mugraph(era_c)) == str(module)
    assert str(import_mugraph(era_c, era="C")) == str(module)
    assert str(import_mugraph(text, era="A")) == str(module)


def test_era_b_reads_940_as_bf16(mugraph_dir: Path) -> None:
    _, module = load(mugraph_dir, "lora.json")
    era_c = export_mugraph(module)  # fp16 written as 940
    as_b = import_mugraph(era_c, era="B")
    as_b.verify()
    printed = str(as_b)
    assert "bf16" in printed and "xf16" not in printed
    assert funcs(as_b)[0].body.block.args[0].type == TensorType(bf16, [16, 256])
    # and B writes fp16 as 941, read back identically
    assert str(import_mugraph(export_mugraph(module, era="B"), era="b")) == str(module)


def test_era_a_reads_940_as_f64(mugraph_dir: Path) -> None:
    _, module = load(mugraph_dir, "lora.json")
    as_a = import_mugraph(export_mugraph(module), era="A")
    assert funcs(as_a)[0].body.block.args[0].type == TensorType(f64, [16, 256])


def test_era_a_export(mugraph_dir: Path) -> None:
    text, module = load(mugraph_dir, "rmsnorm_bs8.json")
    exported = export_mugraph(module, era="A")
    assert '"data_type": 921' in exported and "tb_accum_nored_op" in exported
    assert str(import_mugraph(exported)) == str(module)


def test_detect_era() -> None:
    assert detect_era('[{"data_type": 921}]') == "A"
    assert detect_era('[{"data_type":921}]') == "A"
    assert detect_era('[{"data_type": 9210}]') == "C"
    assert detect_era('[{"op_type": "tb_accum_nored_op"}]') == "A"
    assert detect_era('[{"op_type": "tb_forloop_accum_nored_op", "data_type": 940}]') == "C"


def test_unknown_era_is_rejected(mugraph_dir: Path) -> None:
    text, _ = load(mugraph_dir, "lora.json")
    assert "era" in import_error(text, era="D")


# ---------------------------------------------------------------------------------------
# the whole op set, scalars, dtypes


def test_all_ops_round_trip_every_era() -> None:
    module = strip_names(parse(ALL_OPS_MLIR))
    module.verify()
    for era in ("A", "B", "C"):
        exported = export_mugraph(module, era=era)
        again = import_mugraph(exported, era=era)
        again.verify()
        for op in again.walk():  # the reader marks the kernels it reads as saved plans
            if op.name == "kn.customized":
                assert "kn.saved_plan" in op.attributes
                del op.attributes["kn.saved_plan"]
        assert str(again) == str(module), era


def test_all_ops_json_names() -> None:
    data = json.loads(export_mugraph(strip_names(parse(ALL_OPS_MLIR))))
    kn_types = {op["op_type"] for op in data[0]}
    assert {"kn_reduction_1_op", "kn_concat_0_op", "kn_chunk_0_op", "kn_allreduce_op", "kn_rms_norm_op"} <= kn_types
    (cust,) = [op for op in data[0] if op["op_type"] == "kn_customized_op"]
    tb_types = {op["op_type"] for op in cust["bgraph"]["operators"]}
    assert {
        "tb_reduction_1_op",
        "tb_reduction_1_to_dimx_op",
        "tb_reduction_1_max_op",
        "tb_concat_1_op",
        "tb_forloop_accum_nored_rescale_op",
        "tb_forloop_accum_red_ld_sum_rescale_op",
        "tb_forloop_accum_max_op",
        "tb_forloop_accum_redtox_ld_sum_op",
    } <= tb_types
    dtypes = [op["output_tensors"][0]["data_type"] for op in data[1] if op["op_type"] == "kn_input_op"]
    assert dtypes == [941, 960, 935, 946, 940]


def _strip_scalar_fields(node: Any) -> Any:
    if isinstance(node, list):
        return [_strip_scalar_fields(v) for v in node]
    if isinstance(node, dict):
        return {k: _strip_scalar_fields(v) for k, v in node.items() if k not in ("scalar", "min_val", "max_val")}
    return node


def test_lost_scalars_get_mirage_defaults() -> None:
    module = strip_names(parse(ALL_OPS_MLIR))
    data = _strip_scalar_fields(json.loads(export_mugraph(module)))
    imported = import_mugraph(json.dumps(data))
    scalars = [op.scalar.value.data for op in imported.walk() if isinstance(op, (kn.MulScalarOp, tb.MulScalarOp))]
    clamps = [
        (op.min_value.value.data, op.max_value.value.data)
        for op in imported.walk()
        if isinstance(op, (kn.ClampOp, tb.ClampOp))
    ]
    assert scalars == [0.0, 0.0] and clamps == [(0.0, 1.0), (0.0, 1.0)]
    # other spellings of the fields are read too
    for op in data[0]:
        if op["op_type"] == "kn_clamp_op":
            op["min_value"], op["max_value"] = -2, 3.5
        if op["op_type"] == "kn_mul_scalar_op":
            op["scalar_value"] = 7
    imported = import_mugraph(json.dumps(data))
    (clamp,) = [op for op in imported.walk() if isinstance(op, kn.ClampOp)]
    (mul,) = [op for op in imported.walk() if isinstance(op, kn.MulScalarOp)]
    assert (clamp.min_value.value.data, clamp.max_value.value.data) == (-2.0, 3.5)
    assert mul.scalar.value.data == 7.0


def test_single_graph_file(mugraph_dir: Path) -> None:
    """A bare kernel graph (Mirage `KNGraph.to_json`) is one candidate."""
    text, module = load(mugraph_dir, "lora.json")
    single = json.dumps(json.loads(text)[2])
    imported = import_mugraph(single)
    assert len(funcs(imported)) == 1
    assert str(funcs(imported)[0]) == str(funcs(module)[2]).replace("@graph_2", "@graph_0")


def test_permuted_tb_inputs_export() -> None:
    """tb.input ops loading the block arguments out of order: the exporter permutes the
    customized inputs so that positional binding still holds."""
    text = """
    func.func @graph_0(%0: tensor<8x64xf16> {kn.strides = array<i64: 64, 1>}, %1: tensor<64x32xf16> {kn.strides = array<i64: 32, 1>}) -> tensor<8x32xf16> {
      %2 = kn.customized(%0, %1) attributes {grid_dim = array<i64: 2, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<8x64xf16>, tensor<64x32xf16>) -> tensor<8x32xf16> {
      ^bb0(%x: tensor<8x64xf16>, %w: tensor<64x32xf16>):
        %tw = tb.input %w {input_map = array<i64: 1, -1, -1>, forloop_dim = -1 : i64} : tensor<64x32xf16> -> !tb.stensor<64x16xf16>
        %tx = tb.input %x {input_map = array<i64: -1, -1, -1>, forloop_dim = -1 : i64} : tensor<8x64xf16> -> !tb.stensor<8x64xf16>
        %m = tb.matmul %tx, %tw : !tb.stensor<8x64xf16>, !tb.stensor<64x16xf16> -> !tb.stensor<8x16xf16>
        %a = tb.forloop_accum nored %m : !tb.stensor<8x16xf16> -> !tb.stensor<8x16xf16, after_accum>
        tb.output %a {output_map = array<i64: 1, -1, -1>} : !tb.stensor<8x16xf16, after_accum>
      }
      func.return %2 : tensor<8x32xf16>
    }
    """
    module = parse(text)
    module.verify()
    imported = import_mugraph(export_mugraph(module))
    imported.verify()
    (cust,) = [op for op in imported.walk() if isinstance(op, kn.CustomizedOp)]
    func_args = funcs(imported)[0].body.block.args
    assert list(cust.inputs) == [func_args[1], func_args[0]]


def test_export_errors() -> None:
    bad_type = parse(
        "func.func @graph_0(%0: tensor<4xi32>) -> tensor<4xi32> {\n  func.return %0 : tensor<4xi32>\n}"
    )
    with pytest.raises(MugraphExportError, match="i32"):
        export_mugraph(bad_type)
    with pytest.raises(MugraphExportError, match="era"):
        export_mugraph(bad_type, era="Z")
    with pytest.raises(MugraphExportError, match="not a func.func"):
        export_mugraph(ModuleOp([kn.ExpOp.create(result_types=[])]))
