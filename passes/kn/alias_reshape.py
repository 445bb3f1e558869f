"""`kn-alias-reshape`: a `kn.reshape` whose input's strides allow it becomes a view of the
input's buffer (no data movement).

Runs after `tb-compute-strides` (every DTensor has its strides) and before
`kn-plan-workspace`.  For each `kn.reshape %x : A -> B` of a kernel graph:

* the view strides are numpy's no-copy reshape of `%x`'s strides
  (`dialects/views.reshape_strides`), e.g. a row-major [1, 4096] read as [8, 4, 128] with
  strides (512, 128, 1);
* the reshape is aliased -- `kn.alias` (unit) and `kn.strides = [view strides]` on the op --
  when such strides exist, their innermost dim is the one tb-resolve-layout chose for the
  result (`kn.innermost`; consumers' copies were planned for it), and the result is not a
  graph output (a graph output has its own buffer);
* a reshape that IS a graph output is aliased the other way round (`kn.output_view` beside
  `kn.alias`) when its input is a kernel's result that nothing else reads and the output's
  strides, viewed with the input's shape, are the input's strides: the kernel writes straight
  into the output's buffer (a folded combine's rows, passes/conversion/split_combine.py);
* otherwise it stays a copy: the runtime's `reshape` library call (runtime/library_ops.py)
  writes the elements in row-major order into the result's own workspace buffer.

An aliased reshape has no workspace of its own: kn-plan-workspace keeps its input's buffer
live until the reshape's last reader, the launch plan passes the input's buffer with the
view's strides (codegen/build_launch_plan.py), and kn-to-task-graph maps reads of the view
onto the producer's tiles (passes/mpk/alias.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ArrayAttr, DenseArrayBase, ModuleOp, UnitAttr
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import OpResult, SSAValue
from xdsl.passes import ModulePass

from mirage_xdsl.dialects import kn
from mirage_xdsl.dialects.kn.reshape_op import ALIAS_ATTR, OUTPUT_VIEW_ATTR, ReshapeOp
from mirage_xdsl.dialects.views import reshape_strides
from mirage_xdsl.passes.tb.layout_math import innermost_of_strides


def alias_of(value: SSAValue) -> SSAValue | None:
    """The input of the aliased `kn.reshape` whose result `value` is, else None."""
    if isinstance(value, OpResult) and isinstance(value.op, ReshapeOp) and ALIAS_ATTR in value.op.attributes:
        return value.op.input
    return None


def alias_root(value: SSAValue) -> SSAValue:
    """The tensor owning `value`'s buffer: through aliased reshapes to the first value that
    is not one."""
    while (src := alias_of(value)) is not None:
        value = src
    return value


def alias_into_output(op: ReshapeOp) -> bool:
    """Make the returned `op` a view the other way round (module docstring): its input, a
    kernel's result read only by `op`, is written straight into the output's buffer when the
    output's strides viewed with the input's shape are the strides the kernel writes with."""
    src = op.input
    if not (isinstance(src, OpResult) and isinstance(src.op, kn.CustomizedOp) and len(list(src.uses)) == 1):
        return False
    view = reshape_strides(kn.shape_of(op.output), kn.dtensor_strides(op.output), kn.shape_of(src))
    if view is None or tuple(view) != tuple(kn.dtensor_strides(src)):
        return False
    op.attributes[ALIAS_ATTR] = UnitAttr()
    op.attributes[OUTPUT_VIEW_ATTR] = UnitAttr()
    return True


def alias_op(op: ReshapeOp, returned: set[SSAValue]) -> bool:
    """Alias `op` when it can be (module docstring); True when it was."""
    if op.output in returned:
        return alias_into_output(op)
    src, dst = kn.shape_of(op.input), kn.shape_of(op.output)
    view = reshape_strides(src, kn.dtensor_strides(op.input), dst)
    if view is None:
        return False
    chosen = op.attributes.get("kn.innermost")
    if isinstance(chosen, DenseArrayBase) and kn.ints(chosen)[0] != innermost_of_strides(dst, view):
        return False
    op.attributes[kn.STRIDES_ATTR] = ArrayAttr([kn.int_array(view)])
    op.attributes[ALIAS_ATTR] = UnitAttr()
    return True


@dataclass(frozen=True)
class KnAliasReshapePass(ModulePass):
    """Make `kn.reshape` ops views of their inputs where the strides allow (module docstring)."""

    name = "kn-alias-reshape"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        """Alias every reshape of every kernel-graph function of `op` that can be (`alias_op`).

        Raises:
            Nothing: a reshape that cannot be a view stays a copy.
        """
        for func in [f for f in op.walk() if isinstance(f, FuncOp) and f.body.blocks]:
            block = func.body.block
            returned = {v for o in block.ops if isinstance(o, ReturnOp) for v in o.arguments}
            for o in block.ops:
                if isinstance(o, ReshapeOp):
                    alias_op(o, returned)
