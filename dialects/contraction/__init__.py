"""The tensor-contraction configuration interface of seed 004 (Tasks 1 and 2, and the
`verify` rules of Task 3e): `config.py` is pure Python; `ops.py` is its xDSL dialect."""
