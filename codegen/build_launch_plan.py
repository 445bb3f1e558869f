"""Launch plans: a kernel graph whose customized ops are `cute.kernel`s -> `LaunchPlan`.

`plan_function` turns a `func.func` into a `LaunchPlan` (`launch_plan.py`): `cute.kernel` ->
`KernelLaunch` (grid, block, dynamic shared memory in bytes, grid-sum counters, programmatic
dependent launch), an aliased `kn.reshape` -> nothing (its readers get its input's buffer
with the view's strides), every other `kn` op -> `LibraryCall` (run with CuPy/cuBLAS by the
runtime), tensors referenced as graph inputs, graph outputs or workspace slices
(`kn.workspace_offset`, bytes).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from xdsl.dialects import func
from xdsl.dialects.builtin import DenseArrayBase, IntegerAttr
from xdsl.ir import BlockArgument, Operation, OpResult, SSAValue

from mirage_xdsl.codegen.cuda_syntax import dtype_name, printer_error
from mirage_xdsl.codegen.decode_attention import decode_launch
from mirage_xdsl.codegen.hopper_attention import attention_launch
from mirage_xdsl.codegen.hopper_gemm import hopper_launch
from mirage_xdsl.codegen.kernel_resources import grid_sum_counters, late_finisher_trips, launch_smem_bytes
from mirage_xdsl.codegen.launch_plan import KernelLaunch, LaunchPlan, LibraryCall, TensorRef, TensorSpec
from mirage_xdsl.codegen.permute_copy import permute_launch
from mirage_xdsl.codegen.weight_prefetch import triggers_dependents
from mirage_xdsl.dialects import cute, kn
from mirage_xdsl.dialects.cute.decode_attention import DecodeAttentionOp
from mirage_xdsl.dialects.cute.hopper_attention import HopperAttentionOp
from mirage_xdsl.dialects.cute.hopper_gemm import HopperGemmOp
from mirage_xdsl.dialects.cute.permute_copy import PermuteCopyOp
from mirage_xdsl.dialects.kn import GRID_SUM_SCRATCH_ATTR, element_type_of, ints, shape_of
from mirage_xdsl.dialects.kn.reshape_op import output_view_of
from mirage_xdsl.dialects.kn.strides import dtensor_strides
from mirage_xdsl.target import SMEM_OPTIN_PER_BLOCK
from mirage_xdsl.target.errors import SharedMemoryExceeded


def _spec(value: SSAValue, strides: Sequence[int] | None = None) -> TensorSpec:
    return TensorSpec(
        tuple(shape_of(value)),
        tuple(strides if strides is not None else dtensor_strides(value)),
        dtype_name(element_type_of(value)),  # type: ignore[arg-type]
    )


def _result_strides(fn: func.FuncOp, index: int, value: SSAValue) -> tuple[int, ...]:
    if fn.res_attrs is not None:
        attrs = fn.res_attrs.data[index]
        st = getattr(attrs, "data", {}).get("kn.strides")
        if isinstance(st, DenseArrayBase):
            return ints(st)
    return dtensor_strides(value)


LIBRARY_OPS = {
    kn.ExpOp: "exp",
    kn.SquareOp: "square",
    kn.SqrtOp: "sqrt",
    kn.SiluOp: "silu",
    kn.SigmoidOp: "sigmoid",
    kn.GeluOp: "gelu",
    kn.ReluOp: "relu",
    kn.LogOp: "log",
    kn.ClampOp: "clamp",
    kn.MulScalarOp: "mul_scalar",
    kn.AddScalarOp: "add_scalar",
    kn.AddOp: "add",
    kn.SubOp: "sub",
    kn.MulOp: "mul",
    kn.DivOp: "div",
    kn.PowOp: "pow",
    kn.MatmulOp: "matmul",
    kn.ReductionOp: "reduction",
    kn.ReductionMaxOp: "reduction_max",
    kn.RmsNormOp: "rms_norm",
    kn.ConcatOp: "concat",
    kn.ChunkOp: "chunk",
    kn.ReshapeOp: "reshape",
    kn.AllReduceOp: "all_reduce",
}


def library_params(op: Operation) -> dict[str, float | int | list[int]]:
    """The `LibraryCall.params` of a kernel-level op (exact semantics in the runtime)."""
    if isinstance(op, kn.ClampOp):
        return {"min": float(op.min_value.value.data), "max": float(op.max_value.value.data)}
    if isinstance(op, kn.MulScalarOp | kn.AddScalarOp):
        return {"scalar": float(op.scalar.value.data)}
    if isinstance(op, kn.ReductionOp):
        # size > 1 sums STRIDED groups: out[..., j, ...] = sum_k in[..., j + k*size, ...]
        return {"dim": op.dim.value.data, "size": op.size.value.data, "strided": 1}
    if isinstance(op, kn.ReductionMaxOp):
        return {"dim": op.dim.value.data}
    if isinstance(op, kn.RmsNormOp):
        return {"normalized_shape": list(ints(op.normalized_shape)), "eps": 0.0}
    if isinstance(op, kn.ConcatOp):
        return {"dim": op.dim.value.data}
    if isinstance(op, kn.ChunkOp):
        return {"dim": op.dim.value.data, "chunks": len(op.outputs)}
    if isinstance(op, kn.ReshapeOp):
        return {"shape": list(shape_of(op.output))}
    return {}


def supports_pdl(arch: str) -> bool:
    """Whether kernels for `arch` ("sm_90", "sm_90a", "sm_100", ...) can be launched with
    programmatic dependent launch: `griddepcontrol` needs sm_90 (PTX ISA, "griddepcontrol")."""
    digits = re.search(r"\d+", arch)
    return digits is not None and int(digits.group()) >= 90


def plan_function(fn: func.FuncOp, arch: str = "sm_90") -> LaunchPlan:
    """The LaunchPlan of one kernel graph whose customized ops are `cute.kernel`s."""
    block = fn.body.block
    ret = block.last_op
    if not isinstance(ret, func.ReturnOp):
        raise printer_error(fn, "the kernel graph must end with func.return")
    returned = list(ret.arguments)
    out_index: dict[SSAValue, int] = {}
    for i, v in enumerate(returned):
        out_index.setdefault(v, i)
    inputs = tuple(_spec(a) for a in block.args)
    outputs = tuple(_spec(v, _result_strides(fn, i, v)) for i, v in enumerate(returned))

    def ref(value: SSAValue, user: Operation) -> TensorRef:
        if isinstance(value, BlockArgument) and value.block is block:
            return TensorRef("input", value.index)
        if value in out_index:
            return TensorRef("output", out_index[value])
        if (view := output_view_of(value)) is not None and view.output in out_index:
            # written through the output's view: its buffer, with this value's shape
            return TensorRef("output", out_index[view.output], 0, _spec(value))
        if isinstance(value, OpResult) and isinstance(value.op, kn.ReshapeOp) and kn.ALIAS_ATTR in value.op.attributes:
            # a view of the input's buffer (kn-alias-reshape): its pointer, the view's strides
            src = ref(value.op.input, user)
            return TensorRef(src.kind, src.index, src.offset, _spec(value))
        if not isinstance(value, OpResult):
            raise printer_error(user, "operand is neither a graph input nor an op result")
        offs = value.op.attributes.get("kn.workspace_offset")
        if not isinstance(offs, DenseArrayBase) or value.index >= len(ints(offs)) or ints(offs)[value.index] < 0:
            raise printer_error(
                value.op,
                "an intermediate tensor has no 'kn.workspace_offset'; run kn-plan-workspace first "
                "(mirage-transpile runs every pass in order)",
            )
        return TensorRef("workspace", 0, ints(offs)[value.index], _spec(value))

    steps: list[KernelLaunch | LibraryCall] = []
    counters = 0
    for op in block.ops:
        if isinstance(op, func.ReturnOp) or op.name == "mpk.task_graph":
            continue  # a task graph runs the kernels beside it (codegen/megakernel.py)
        if isinstance(op, cute.KernelOp):
            limit = SMEM_OPTIN_PER_BLOCK.get(arch.rstrip("a"), cute.MAX_SMEM_BYTES)
            if (needed := launch_smem_bytes(op)) > limit:
                raise SharedMemoryExceeded(
                    f"cuda target: {op.name}: {op.kernel_name.data} needs {needed} B of shared memory, more than {arch}'s {limit} B",
                    needed,
                    limit,
                )
            args = tuple(ref(v, op) for v in op.outputs) + tuple(ref(v, op) for v in op.inputs)
            if n_counters := grid_sum_counters(op):
                if late_finisher_trips(op) is None:
                    scratch = op.attributes.get(GRID_SUM_SCRATCH_ATTR)
                    if not isinstance(scratch, IntegerAttr):
                        raise printer_error(op, f"a kernel with a grid sum needs '{GRID_SUM_SCRATCH_ATTR}'; run kn-plan-workspace first")
                    args += (TensorRef("workspace", 0, scratch.value.data),)
                args += (TensorRef("counters", 0, 4 * counters),)
                counters += n_counters
            pdl = supports_pdl(arch)
            one_wave = pdl and triggers_dependents(op)
            steps.append(
                KernelLaunch(op.kernel_name.data, op.grid, op.block, launch_smem_bytes(op), args, pdl, one_wave=one_wave)
            )
            continue
        if isinstance(op, HopperAttentionOp):
            steps.append(attention_launch(op, ref))
            continue
        if isinstance(op, DecodeAttentionOp):
            steps.append(decode_launch(op, ref, counters))
            counters += op.counter_words()
            continue
        if isinstance(op, HopperGemmOp):
            steps.append(hopper_launch(op, ref, counters))
            counters += op.counter_words()
            continue
        if isinstance(op, PermuteCopyOp):
            steps.append(permute_launch(op, ref))
            continue
        if isinstance(op, kn.ReshapeOp) and kn.ALIAS_ATTR in op.attributes:
            continue  # a view: its readers get the input's buffer (`ref`)
        if isinstance(op, kn.CustomizedOp):
            raise printer_error(op, "kn.customized was not lowered; run convert-tb-to-cute (mirage-transpile) first")
        name = LIBRARY_OPS.get(type(op))  # type: ignore[call-overload]  # keyed by the kn op classes
        if name is None:
            raise printer_error(op, "has no library lowering")
        steps.append(
            LibraryCall(
                name,
                tuple(ref(v, op) for v in op.operands),
                tuple(ref(v, op) for v in op.results),
                library_params(op),
            )
        )
    # graph outputs that are graph inputs or repeat another output are copied at the end
    for i, v in enumerate(returned):
        src: TensorRef | None = None
        if isinstance(v, BlockArgument) and v.block is block:
            src = TensorRef("input", v.index)
        elif out_index[v] != i:
            src = TensorRef("output", out_index[v])
        if src is not None:
            steps.append(LibraryCall("copy", (src,), (TensorRef("output", i),), {}))
    ws = fn.attributes.get("kn.workspace_size")
    workspace = ws.value.data if isinstance(ws, IntegerAttr) else 0
    for s in steps:
        for r in (*s.args, *(s.results if isinstance(s, LibraryCall) else ())):
            if r.kind == "workspace" and r.spec is not None:
                need = r.offset + _spec_bytes(r.spec)
                if need > workspace:
                    raise printer_error(fn, f"workspace slice [{r.offset}, {need}) exceeds kn.workspace_size = {workspace}")
    return LaunchPlan(fn.sym_name.data, inputs, outputs, workspace, tuple(steps), arch, counters)


_DTYPE_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8, "int8": 1, "uint16": 2}


def _spec_bytes(spec: TensorSpec) -> int:
    """Bytes spanned by a strided tensor (1 + the largest element offset)."""
    top = sum((d - 1) * s for d, s in zip(spec.shape, spec.strides))
    return (top + 1) * _DTYPE_BYTES[spec.dtype]
