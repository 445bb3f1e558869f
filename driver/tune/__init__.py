"""The genetic autotuner (GitHub issue #33): `space.py` (genes = pass options, validity
rules, variant strings), `genetic.py` (the GA engine, no GPU), `evaluate.py` (compile in a
process pool, check against the reference, time on the GPU), `cache.py` (the persistent
tuning cache) and `tuner.py` (all of them together: `tune`, used by `mirage-tune`,
`compile(..., tune=G)` and `mirage-bench --tune`).

Importing this package imports nothing heavy; xDSL and CuPy load only when compiling or timing.
"""
