"""The `cute` dialect: the CuTe-level kernel IR that the CUDA printer turns into C++ (one op ~ one call).

`convert-tb-to-cute` lowers every scheduled, memory-planned `kn.customized` to a
`cute.kernel` whose body is the kernel's straight-line program in execution order:

* `cute.smem_alloc`: a shared-memory tile at a planned byte offset (N offsets = the ring
  of N stage buffers of a cp.async-pipelined input; iteration `it` uses `it % N`); its type `!cute.smem<f16, (2,128):(128,1),
  xor<3,3,4>>` carries the element type, the layout `(shape):(stride)` (dims outermost
  first, strides in elements) and the swizzle (`xor<B,M,S>` = CuTe `Swizzle<B,M,S>` applied
  to the element offset; `shift` = padding already folded into the strides).
* `cute.copy_g2s` / `cute.copy_s2g`: tile copies between a kernel argument (a DTensor)
  and shared memory: `sync` (element-wise), `chunked` (16-byte vectors) or `async`
  (16-byte `cp.async`, with `cute.cp_async_commit` / `cute.cp_async_wait`).
* `cute.fill` (clear an accumulator), `cute.elementwise` (a fusion chain: leader + unary
  epilogue + store/accumulate), `cute.reduce` (sum or running max over one dim with
  STRIDED groups), `cute.concat`, `cute.mma_init` / `cute.mma` / `cute.frag_store` (a tiled
  MMA whose fp32 accumulator fragment lives in registers; `cute.mma_chain` = matmul ->
  epilogue -> matmul with the intermediate kept in registers), `cute.causal_mask` (the
  attention mask at the tile's global position), `cute.barrier`, `cute.for`.

Every verifier message reads `cute.<op>: <rule>`.  Math is fp32; tiles produced by
accumulators are fp32 in shared memory (passes/README.md, "Storage precision").

Modules: `attrs.py` (attributes, types, limits), `kernel.py` (`cute.kernel`, `CuteOp`,
`cute.for`), `memory_ops.py`, `compute_ops.py`, `mask_ops.py`, `mma_ops.py`, `dialect.py` (the `Cute`
dialect); the decisions of the cute passes that several layers read: `grid_sum_epilogue.py`,
`row_chains.py`.
"""

from mirage_xdsl.dialects.cute.attrs import *  # noqa: F403
from mirage_xdsl.dialects.cute.compute_ops import *  # noqa: F403
from mirage_xdsl.dialects.cute.dialect import *  # noqa: F403
from mirage_xdsl.dialects.cute.kernel import *  # noqa: F403
from mirage_xdsl.dialects.cute.mask_ops import *  # noqa: F403
from mirage_xdsl.dialects.cute.memory_ops import *  # noqa: F403
from mirage_xdsl.dialects.cute.mma_ops import *  # noqa: F403
