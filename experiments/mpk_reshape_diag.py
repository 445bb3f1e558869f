"""Per-output errors of our per-kernel decoder_layer on the GPU, with and without the late
finisher (benchmarks/EXPERIMENTS.md, the decoder-layer megakernel row: the last output was wrong on the GPU only, an ld.global.nc / PDL bug since fixed)."""
import numpy as np, cupy
from mirage_xdsl.bench.megakernel import workload
from mirage_xdsl.driver.compile import prepare, _compiled
from mirage_xdsl.reference.executor import run_reference
from mirage_xdsl.runtime.measure import to_device
from mirage_xdsl.runtime.random_inputs import numpy_values, random_inputs
mod = workload("decoder_layer")
for opts in ({}, {"late_finisher": 0}):
    p = prepare(mod, None, None, options=opts)
    g = _compiled(p, None, False, True)
    ins = random_inputs(g.plan.inputs, 1)
    refs = run_reference(mod, [numpy_values(x, s.dtype) for x, s in zip(ins, g.plan.inputs)])
    outs = g(*[to_device(cupy, x) for x in ins]); cupy.cuda.runtime.deviceSynchronize()
    errs = [float(np.abs(numpy_values(cupy.asnumpy(o), s.dtype) - r).max() / np.abs(r).max()) for o, s, r in zip(outs, g.plan.outputs, refs)]
    print("per-kernel", opts, "errors per output", errs, "nan", [bool(np.isnan(cupy.asnumpy(o)).any()) for o in outs], flush=True)
