"""The compile driver: stages from a kernel graph to a loaded kernel (`compile.py`), reading
kernel graphs from disk (`load.py`), nvcc and its cubin cache (`nvcc.py`, with the checked
cache entries of `disk_cache.py`), the registries of dialects and targets (`registry.py`) and
the genetic autotuner (`tune/`)."""
