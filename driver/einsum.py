"""`mx.einsum(equation, a, b)`: a binary contraction compiled once per shape and run.

    import mirage_xdsl as mx
    c = mx.einsum("cmk,ckn->cmn", a, b)        # torch or CuPy fp16/bf16 tensors on an sm_90 GPU

The first call for an (equation, shapes, dtype, options) builds the kernel graph
(frontends/einsum.py), lowers it with `lower_einsum`: `contraction-permute-operands`
(transposes an operand whose layout has no batched-GEMM view, e.g. both of
`aebf,dfce->abcd`), `kn-plan-workspace` (their buffers), `convert-contraction-to-hopper` (the
sm_90a TMA + wgmma kernel, passes/contraction/to_hopper.py) and
`convert-contraction-permute-to-cute` (our copy kernels), prints CUDA and compiles it through
`driver.compile` (nvcc's cubin is cached on disk, driver/nvcc.py); the loaded
`CompiledGraph` is kept in an in-process cache, so later calls only encode the two tensor
maps and launch.  Inputs must be contiguous (row-major), as the config assumes.  A third
operand (`"cmk,ckn,cmn->cmn"`) is the ELWISE_MUL factor the GEMM's epilogue multiplies in.
"""

from __future__ import annotations

from typing import Any

from mirage_xdsl.driver.compile import _compiled, make_context, prepare
from mirage_xdsl.runtime.executable import CompiledGraph, describe

_CACHE: dict[tuple[Any, ...], CompiledGraph] = {}
ARCH = "sm_90a"
"""wgmma and setmaxnreg need the architecture-specific sm_90a target (PTX ISA)."""


def compile_einsum(
    equation: str,
    shapes: tuple[tuple[int, ...], ...],
    dtype: str,
    *,
    group_m: int = -1,
    stages: int = 0,
    tile_n: int = 0,
    epilogue: str = "",
    cluster: int = 1,
    pingpong: int = -1,
    split_k: int = 0,
    stream_k: int = -1,
    tile_m: int = 0,
    share_a: int = 0,
    poison_outputs: bool = False,
) -> CompiledGraph:
    """The compiled graph of one einsum (cached per arguments in this process).

    Args:
        equation, shapes, dtype: see `frontends.einsum.einsum_module`.
        group_m, stages, tile_n, epilogue, cluster, pingpong, split_k, stream_k, tile_m, share_a:
            `convert-contraction-to-hopper` options (-1/0/0/""/-1/0/-1/0: decide; cluster 1: none;
            share_a 0: pairs share B).
        poison_outputs: fill outputs with NaN before each run (tests).

    Raises:
        ValueError: a malformed equation/shape/dtype.
        PassFailedException: the contraction has no sm_90 GEMM view, not even with its
            operands permuted (message says why).
        CudaCompileError, LaunchError: see `driver.compile.compile`.
    """
    schedule_args = (group_m, stages, tile_n, epilogue, cluster, pingpong, split_k, stream_k, tile_m, share_a)
    key = (equation, shapes, dtype, *schedule_args, poison_outputs)
    graph = _CACHE.get(key)
    if graph is None:
        from mirage_xdsl.frontends.einsum import einsum_module

        schedule = {
            "group_m": group_m,
            "stages": stages,
            "tile_n": tile_n,
            "epilogue": epilogue,
            "cluster": cluster,
            "pingpong": pingpong,
            "split_k": split_k,
            "stream_k": stream_k,
            "tile_m": tile_m,
            "share_a": share_a,
        }
        module = lower_einsum(einsum_module(equation, shapes, dtype), **schedule)
        graph = _compiled(prepare(module, arch=ARCH), None, False, poison_outputs)
        _CACHE[key] = graph
    return graph


def lower_einsum(module: Any, **schedule: Any) -> Any:
    """`module` (an einsum kernel graph, `frontends.einsum.einsum_module`) through the einsum
    pipeline (module docstring) in place, `convert-contraction-to-hopper` with the `schedule` options
    (`compile_einsum`'s; missing ones: the pass decides); returns `module`.

    Raises:
        PassFailedException: the contraction has no sm_90 GEMM view, or the options break a
            schedule rule (the message names it).
    """
    from mirage_xdsl.passes.contraction.permute_operands import PermuteOperandsPass
    from mirage_xdsl.passes.contraction.to_copy import ConvertPermuteToCutePass
    from mirage_xdsl.passes.contraction.to_hopper import ConvertContractionToHopperPass
    from mirage_xdsl.passes.kn.plan_workspace import PlanWorkspacePass

    ctx = make_context()
    for p in (PermuteOperandsPass(), PlanWorkspacePass(), ConvertContractionToHopperPass(**schedule), ConvertPermuteToCutePass()):
        p.apply(ctx, module)
    return module


def einsum(equation: str, *operands: Any, **options: Any) -> Any:
    """`einsum(equation, a, b)` (or `einsum("..,..,out->out", a, b, d)`: `(a x b) * d`) on
    the GPU with our sm_90a kernel (same framework out as in).

    Args:
        equation: a binary einsum, e.g. `cmk,ckn->cmn`, optionally with the output's indices
            as a third input (the ELWISE_MUL factor).
        operands: two (or three) contiguous fp16 or bf16 CUDA tensors (torch or CuPy), same dtype.
        options: `compile_einsum` options.

    Raises:
        ValueError: dtypes differ; see `compile_einsum` for the rest.
    """
    infos = [describe(x) for x in operands]
    if len({i.dtype for i in infos}) > 1:
        raise ValueError(f"einsum: inputs have dtypes {[i.dtype for i in infos]}; pass one dtype")
    graph = compile_einsum(equation, tuple(tuple(i.shape) for i in infos), infos[0].dtype, **options)
    (out,) = graph(*operands)
    return out
