"""What the kernel-level (`kn`) and threadblock-level (`tb`) dialects share, below both.

Modules: `checks.py` (the verifier error `KnVerifyError`, its `<op>: <rule>` messages, shape
checks and the shape / element-type accessors), `op_bases.py` (abstract op bases, one per op
family: unary, clamp, scalar multiply, binary with broadcast, matmul, concat, reductions).
Imports nothing from `kn`, `tb` or `cute` (import-linter contract in pyproject.toml), so both
levels subclass these bases without an import cycle.
"""
