"""The project's xDSL dialects, one sub-package per IR level, highest first.

* `contraction`: one tensor contraction with its seed-004 configuration and schedule;
* `kn`: Mirage's kernel graph (device tensors, one op per kernel-level operator);
* `tb`: Mirage's threadblock graph (shared-memory tiles), nested in `kn.customized`;
* `cute`: the CuTe-level kernel IR that the CUDA printer turns into C++;
* `mpk`: the task graph of a persistent megakernel.

`common/` holds the abstract op bases and checks that `kn` and `tb` share (below both, no
import cycle); `tiling.py` the shape rules their verifiers apply.
"""
