"""The compile driver: stages from a kernel graph to a loaded kernel (`compile.py`), nvcc and
its cubin cache (`nvcc.py`), and the registries of dialects and targets (`registry.py`)."""
