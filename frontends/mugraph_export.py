"""`kn`/`tb` IR -> Mirage saved-muGraph JSON.

`export_mugraph` writes the inverse (era C by default): guids are renumbered from
10000000 (DTensors) and 20000000 (STensors), `smem_offset` is 0, layouts are
`DmemRowMajor`/`SmemRowMajor` and `dim` is padded to 4 entries with 0s.  JSON -> IR ->
JSON -> IR is the identity on the IR.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, ModuleOp, TensorType
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import BlockArgument, Operation, SSAValue

from mirage_xdsl.dialects import kn, tb, tiling
from mirage_xdsl.dialects.kn import STRIDES_ATTR, element_type_of, ints, shape_of
from mirage_xdsl.dialects.tb import STensorType
from mirage_xdsl.frontends.mugraph_schema import (
    DTENSOR_GUID_BASE,
    DTYPE_OF_TYPE,
    ERAS,
    KN_BINARY,
    KN_UNARY,
    STENSOR_GUID_BASE,
    TB_BINARY,
    TB_UNARY,
    MugraphExportError,
)


class _Exporter:
    def __init__(self, era: str):
        if era not in ERAS:
            raise MugraphExportError(f"unknown muGraph schema era {era!r} (expected A, B or C)")
        self.era = era
        self.codes = DTYPE_OF_TYPE[era]
        self.accum_prefix = "tb_accum_" if era == "A" else "tb_forloop_accum_"
        self.next_dguid = DTENSOR_GUID_BASE
        self.next_sguid = STENSOR_GUID_BASE
        self.where = ""

    def fail(self, msg: str) -> MugraphExportError:
        """The MugraphExportError for `msg`, prefixed with the current location (`self.where`) when set; callers raise it."""
        return MugraphExportError(f"{self.where}: {msg}" if self.where else msg)

    def dtype(self, value: SSAValue) -> int:
        """The era's muGraph `data_type` code of `value`'s element type.

        Raises:
            MugraphExportError: the element type has no data_type in this era.
        """
        typ = element_type_of(value)
        code = self.codes.get(typ)
        if code is None:
            raise self.fail(f"element type {typ} has no era-{self.era} muGraph data_type")
        return code

    @staticmethod
    def dims(shape: Sequence[int]) -> list[int]:
        """`shape` padded with 0s to MAX_TENSOR_DIMS (4) entries: the JSON `dim` field."""
        return list(shape) + [0] * (tiling.MAX_TENSOR_DIMS - len(shape))

    def dtensor(self, value: SSAValue) -> dict[str, Any]:
        """A new DTensor descriptor for the ranked tensor `value`: the next DTensor guid, `DmemRowMajor`, `dim` padded to 4.

        Raises:
            MugraphExportError: `value` is not a ranked tensor, has a dynamic or empty dim, or its element type has no
                data_type in this era.
        """
        if not isinstance(value.type, TensorType):
            raise self.fail(f"value of type {value.type} is not a ranked tensor")
        shape = shape_of(value)
        if any(d < 1 for d in shape):
            raise self.fail(f"tensor {value.type} has a dynamic or empty dim")
        guid = self.next_dguid
        self.next_dguid += 1
        return {
            "data_type": self.dtype(value),
            "dim": self.dims(shape),
            "guid": guid,
            "layout": "DmemRowMajor",
            "num_dims": len(shape),
        }

    def stensor(self, value: SSAValue) -> dict[str, Any]:
        """A new STensor descriptor for the `!tb.stensor` `value`: the next STensor guid, `SmemRowMajor`, `smem_offset` 0,
        `after_accum` from the type, `dim` padded to 4.

        Raises:
            MugraphExportError: `value` is not a `!tb.stensor`, or its element type has no data_type in this era.
        """
        typ = value.type
        if not isinstance(typ, STensorType):
            raise self.fail(f"value of type {typ} is not a !tb.stensor")
        guid = self.next_sguid
        self.next_sguid += 1
        shape = typ.get_shape()
        return {
            "after_accum": typ.is_after_accum,
            "data_type": self.dtype(value),
            "dim": self.dims(shape),
            "guid": guid,
            "layout": "SmemRowMajor",
            "num_dims": len(shape),
            "smem_offset": 0,
        }

    @staticmethod
    def strides_of(attrs: ArrayAttr[DictionaryAttr] | None, i: int) -> tuple[int, ...] | None:
        """The `kn.strides` (elements per dim) of entry `i` of a func's argument/result attributes; None when absent."""
        if attrs is None or i >= len(attrs.data):
            return None
        attr = attrs.data[i].data.get(STRIDES_ATTR)
        return ints(attr) if attr is not None else None  # type: ignore[arg-type]

    @staticmethod
    def xyz(values: Sequence[int]) -> dict[str, int]:
        """`values` as an `{"x", "y", "z"}` object (grid/block dims, input/output maps)."""
        return dict(zip(tiling.GRID_AXES, values))

    def graph(self, gi: int, func: FuncOp) -> list[dict[str, Any]]:
        """The JSON operator list of kernel graph `gi`: one `kn_input_op` per argument (strides from `kn.strides`, else
        row-major), one entry per body op, then one `kn_output_op` per returned value.  Sets the error location.

        Raises:
            MugraphExportError: the func has other than one block, or an op, type or operand has no muGraph equivalent.
        """
        self.where = f"graph {gi} (@{func.sym_name.data})"
        if len(func.body.blocks) != 1:
            raise self.fail("a kernel graph needs exactly one block")
        block = func.body.block
        descs: dict[SSAValue, dict[str, Any]] = {}
        ops: list[dict[str, Any]] = []
        for i, arg in enumerate(block.args):
            desc = descs[arg] = self.dtensor(arg)
            strides = self.strides_of(func.arg_attrs, i) or tiling.row_major_strides(shape_of(arg))
            ops.append(
                {
                    "op_type": "kn_input_op",
                    "input_map": self.xyz((-1, -1, -1)),
                    "input_strides": list(strides),
                    "input_tensors": [],
                    "output_tensors": [desc],
                }
            )
        for op in block.ops:
            if isinstance(op, ReturnOp):
                for i, value in enumerate(op.operands):
                    out_strides = self.strides_of(func.res_attrs, i)
                    ops.append(
                        {
                            "op_type": "kn_output_op",
                            "input_tensors": [self.ref(descs, value)],
                            "output_map": self.xyz((-1, -1, -1)),
                            "output_strides": list(out_strides) if out_strides is not None else [],
                            "output_tensors": [],
                        }
                    )
                continue
            entry = self.kn_op(op, descs)
            if "input_tensors" not in entry:
                entry["input_tensors"] = [self.ref(descs, v) for v in op.operands]
            entry["output_tensors"] = [descs.setdefault(r, self.dtensor(r)) for r in op.results]
            ops.append(entry)
        return ops

    def ref(self, descs: dict[SSAValue, dict[str, Any]], value: SSAValue) -> dict[str, Any]:
        """The descriptor already emitted for `value` (an `input_tensors` reference).

        Raises:
            MugraphExportError: `value` is not defined earlier in this graph (not in `descs`).
        """
        desc = descs.get(value)
        if desc is None:
            raise self.fail(f"operand {value} is not defined in this graph")
        return desc

    def kn_op(self, op: Operation, descs: dict[SSAValue, dict[str, Any]]) -> dict[str, Any]:
        """The JSON entry (`op_type` and parameters) of the kernel op `op`; the caller adds the output tensors.  A
        `kn.customized` entry also carries its `bgraph` and its `input_tensors` in `tb.input` order.

        Raises:
            MugraphExportError: `op` has no muGraph equivalent, or its threadblock graph cannot be exported (`bgraph`).
        """
        for name, cls in KN_UNARY.items():
            if type(op) is cls:
                return {"op_type": f"kn_{name}_op"}
        for name, bcls in KN_BINARY.items():
            if type(op) is bcls:
                return {"op_type": f"kn_{name}_op"}
        if isinstance(op, kn.MulScalarOp):
            return {"op_type": "kn_mul_scalar_op", "scalar": op.scalar.value.data}
        if isinstance(op, kn.ClampOp):
            return {"op_type": "kn_clamp_op", "min_val": op.min_value.value.data, "max_val": op.max_value.value.data}
        if isinstance(op, kn.RmsNormOp):
            return {"op_type": "kn_rms_norm_op", "normalized_shape": list(ints(op.normalized_shape))}
        if isinstance(op, kn.ReductionOp):
            dim, size = op.dim.value.data, op.size.value.data
            return {"op_type": f"kn_reduction_{dim}_op", "reduce_dim": dim, "reduce_size": size}
        if isinstance(op, kn.ConcatOp):
            dim = op.dim.value.data
            return {"op_type": f"kn_concat_{dim}_op", "concat_dim": dim}
        if isinstance(op, kn.ChunkOp):
            dim = op.dim.value.data
            return {"op_type": f"kn_chunk_{dim}_op", "chunk_dim": dim, "chunk_size": len(op.results)}
        if isinstance(op, kn.AllReduceOp):
            return {"op_type": "kn_allreduce_op", "inplace": op.inplace is not None}
        if isinstance(op, kn.CustomizedOp):
            bgraph, bound = self.bgraph(op, descs)
            return {
                "op_type": "kn_customized_op",
                "bgraph": bgraph,
                "input_tensors": [self.ref(descs, v) for v in bound],
            }
        raise self.fail(f"operation {op.name} has no muGraph equivalent")

    def bgraph(
        self, op: kn.CustomizedOp, descs: dict[SSAValue, dict[str, Any]]
    ) -> tuple[dict[str, Any], list[SSAValue]]:
        """The `bgraph` object of `op` (grid, block, forloop_range, reduction_dimx, tb operators) and `op`'s inputs in the
        order its `tb.input` ops load them (the JSON binds them positionally); adds `op`'s results to `descs`.

        Raises:
            MugraphExportError: a `tb.input`/`tb.output` carries a view (view_offset / result_index), a `tb.input` does not
                load a block argument of `op`, the inputs are not each loaded exactly once, there are more `tb.output` ops
                than results, or a tb op or type has no muGraph equivalent.
        """
        block = op.body.block
        inputs = list(op.inputs)
        for o in block.ops:
            if (isinstance(o, tb.InputOp) and o.view_offset is not None) or (
                isinstance(o, tb.OutputOp) and (o.view_offset is not None or o.result_index is not None)
            ):
                raise self.fail(
                    f"{o.name} with a view (view_offset / result_index, from kn-fold-views) has no muGraph "
                    "equivalent; export the graph before kn-fuse, or with kn.chunk / kn.concat as kernel-level ops"
                )
        tb_inputs = [o for o in block.ops if isinstance(o, tb.InputOp)]
        order = []
        for o in tb_inputs:
            arg = o.dtensor
            if not isinstance(arg, BlockArgument) or arg.block is not block:
                raise self.fail("tb.input must load a block argument of its kn.customized")
            order.append(arg.index)
        if sorted(order) != list(range(len(inputs))):
            raise self.fail(
                f"kn.customized: the tb.input ops load block arguments {order}; muGraph JSON needs each "
                f"of the {len(inputs)} inputs loaded exactly once"
            )
        # JSON binds the i-th tb_input_op to the i-th customized input: permute the inputs
        # to the tb.input order (the identity for imported graphs).
        bound = [inputs[i] for i in order]
        outputs = [descs.setdefault(r, self.dtensor(r)) for r in op.outputs]
        sdescs: dict[SSAValue, dict[str, Any]] = {}
        operators: list[dict[str, Any]] = []
        n_out = 0
        for top in block.ops:
            if isinstance(top, tb.InputOp):
                entry: dict[str, Any] = {
                    "op_type": "tb_input_op",
                    "dtensor": self.ref(descs, inputs[top.dtensor.index]),  # type: ignore[attr-defined]
                    "input_map": self.xyz(top.imap),
                    "forloop_dim": top.fdim,
                    "input_tensors": [],
                }
            elif isinstance(top, tb.OutputOp):
                if n_out >= len(outputs):
                    raise self.fail("kn.customized has more tb.output ops than results")
                entry = {
                    "op_type": "tb_output_op",
                    "dtensor": outputs[n_out],
                    "output_map": self.xyz(top.omap),
                    "input_tensors": [self.ref(sdescs, top.input)],
                }
                n_out += 1
            else:
                entry = self.tb_op(top, op)
                entry["input_tensors"] = [self.ref(sdescs, v) for v in top.operands]
            entry["output_tensors"] = [sdescs.setdefault(r, self.stensor(r)) for r in top.results]
            operators.append(entry)
        return {
            "graph_level": "thread_block_graph",
            "grid_dim": self.xyz(op.grid),
            "block_dim": self.xyz(op.block),
            "forloop_range": op.num_iterations,
            "reduction_dimx": op.dimx,
            "smem_offset": 0,
            "operators": operators,
        }, bound

    def tb_op(self, op: Operation, graph: kn.CustomizedOp) -> dict[str, Any]:
        """The JSON entry (`op_type` and parameters) of the threadblock op `op`; the caller adds the tensors.  Accumulators
        take the era's prefix (`tb_accum_` in era A, else `tb_forloop_accum_`); `reduction_*_to_dimx` gets `reduce_size`
        = `graph`'s reduction_dimx.

        Raises:
            MugraphExportError: `op` has no muGraph equivalent.
        """
        for name, cls in TB_UNARY.items():
            if type(op) is cls:
                return {"op_type": f"tb_{name}_op"}
        for name, tcls in TB_BINARY.items():
            if type(op) is tcls:
                return {"op_type": f"tb_{name}_op"}
        if isinstance(op, tb.MulScalarOp):
            return {"op_type": "tb_mul_scalar_op", "scalar": op.scalar.value.data}
        if isinstance(op, tb.ClampOp):
            return {"op_type": "tb_clamp_op", "min_val": op.min_value.value.data, "max_val": op.max_value.value.data}
        if isinstance(op, tb.ForloopAccumOp):
            return {"op_type": f"{self.accum_prefix}{op.accum_kind}_op"}
        if isinstance(op, tb.ReductionToDimxOp):
            d = op.reduce_dim
            return {"op_type": f"tb_reduction_{d}_to_dimx_op", "reduce_dim": d, "reduce_size": graph.dimx}
        if isinstance(op, tb.ReductionMaxOp):
            d = op.reduce_dim
            return {"op_type": f"tb_reduction_{d}_max_op", "reduce_dim": d, "reduce_size": -1}
        if isinstance(op, tb.ReductionOp):
            d = op.reduce_dim
            return {"op_type": f"tb_reduction_{d}_op", "reduce_dim": d, "reduce_size": 1}
        if isinstance(op, tb.ConcatOp):
            d = op.dim.value.data
            return {"op_type": f"tb_concat_{d}_op", "concat_dim": d}
        raise self.fail(f"operation {op.name} has no muGraph equivalent")


def export_mugraph(module: ModuleOp, era: str = "C") -> str:
    """Write `module` (one `func.func` per kernel graph) as a saved-muGraph JSON text.

    Raises:
        MugraphExportError: an op, type or structure without a muGraph equivalent.
    """
    exporter = _Exporter(era.upper() if isinstance(era, str) else era)
    graphs = []
    for gi, op in enumerate(module.ops):
        if not isinstance(op, FuncOp):
            raise MugraphExportError(f"top-level op {gi} ({op.name}) is not a func.func kernel graph")
        graphs.append(exporter.graph(gi, op))
    return json.dumps(graphs, indent=1, sort_keys=True)
