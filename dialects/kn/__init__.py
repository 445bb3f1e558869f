"""The `kn` dialect: Mirage's kernel graph (device tensors, one op per kernel-level operator).

A kernel graph is a `func.func` whose arguments are the graph inputs (DTensors, builtin
`tensor<...>` types) and whose results are the graph outputs.  Input strides are the
argument attribute `kn.strides` (elements, outermost first); an output's chosen strides
are the result attribute `kn.strides` (absent: the compiler chooses).  The unit argument
attribute `kn.weight` promises that nothing queued on the stream before a launch of the graph
writes that input (model weights), so the generated kernels may load it before the previous
kernel has finished (`weight_inputs`).  Op set and shape
rules: Mirage `include/mirage/kernel/*.h`, `src/kernel/*.cc` (mirage-notes 1.3).

Modules: `tensors.py` (DTensor attributes and checks, `KnOp`), `elementwise_ops.py`,
`compute_ops.py`, `mask_ops.py` (`kn.causal_mask`), `reshape_op.py` (`kn.reshape`), `customized.py` (`kn.customized`),
`dialect.py` (the `Kernel` dialect),
`graph_verify.py` (whole-graph checks), `strides.py` (DTensor strides).  The ops subclass the
abstract bases that `tb` shares (`dialects/common/op_bases.py`); this package also re-exports
the shared checks and accessors (`dialects/common/checks.py`: `shape_of`, `fail`, `KnVerifyError`).
"""

from mirage_xdsl.dialects.common.checks import *  # noqa: F403
from mirage_xdsl.dialects.kn.compute_ops import *  # noqa: F403
from mirage_xdsl.dialects.kn.customized import *  # noqa: F403
from mirage_xdsl.dialects.kn.dialect import *  # noqa: F403
from mirage_xdsl.dialects.kn.elementwise_ops import *  # noqa: F403
from mirage_xdsl.dialects.kn.mask_ops import *  # noqa: F403
from mirage_xdsl.dialects.kn.reshape_op import *  # noqa: F403
from mirage_xdsl.dialects.kn.strides import dtensor_strides  # noqa: F401
from mirage_xdsl.dialects.kn.tensors import *  # noqa: F403
