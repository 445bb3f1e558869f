"""The program suite of issue #30 item 2: plain kernel graphs at LLM sizes, each with its torch
program, registered as `mirage-bench` workloads (the `suite` group).

- `table.py`: the programs, their size points and dtypes, the workload names (pure data);
- `graphs.py`: the kernel-graph builders (Python builder API);
- `torch_programs.py`: the torch peers;
- `write.py`: writes `examples/suite/<workload>.mlir`.
"""
