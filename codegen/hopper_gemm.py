"""CUDA for `cute.hopper_gemm`: the kernel (a call of `mx::hopper::gemm_ws`) and its launch.

The op's attributes are printed as they are (convert-contraction-to-hopper decided them):

    #include "mirage_xdsl/hopper_gemm.cuh"
    extern "C" __global__ void __launch_bounds__(384, 1)
    graph_hopper_gemm_0(const __grid_constant__ CUtensorMap a, const __grid_constant__ CUtensorMap b,
                        const __grid_constant__ CUtensorMap cm, half* __restrict__ c) {
      mx::hopper::gemm_ws<half, 256, 3, 2, 1, 2, 1>(&a, &b, &cm, c, mx::hopper::GemmShape{...});
    }

With an ELWISE_MUL factor (`op.mul`) the kernel takes `const T* d` after `c` and instantiates
`gemm_ws<..., CLUSTER, 1>` (the epilogue multiplies by D); the launch passes its pointer, and
where the factor comes by TMA (`op.mul_by_tma`, `gemm_ws<..., CLUSTER, 2>`) also D's tensor map
`dm` after `cm`.  With an `activation` the source defines
`struct <kernel>_act { apply(x) }` from the op's functions (the same `mx::f_*` expressions as
every other epilogue) and passes it as `ACT`.

The launch (`KernelLaunch`) carries two `TensorMapSpec`s, A as {k, m, c_inner, c_outer}
with box {64, BM, 1, 1} and B as {n, k, ...} with box {64, 64, 1, 1} (N-contiguous B) or
{k, n, ...} with box {64, BN, 1, 1} (K-contiguous B), and for the `tma_store` epilogue C (then
D, when it comes by TMA) as {n, m, ...} with box {64, 64, 1, 1}, all with the 128-byte swizzle
the header's shared-memory layouts assume; the runtime encodes them per call.
"""

from __future__ import annotations

from collections.abc import Callable

from xdsl.dialects.builtin import BFloat16Type, Float16Type, ModuleOp, TensorType
from xdsl.ir import Operation, SSAValue

from mirage_xdsl.codegen.cuda_syntax import CudaEmitError
from mirage_xdsl.codegen.launch_plan import KernelLaunch, TensorMapSpec, TensorRef
from mirage_xdsl.codegen.printer_base import KernelPrinterBase
from mirage_xdsl.dialects.cute.decode_attention import DecodeAttentionOp
from mirage_xdsl.dialects.cute.hopper_attention import HopperAttentionOp
from mirage_xdsl.dialects.cute.hopper_gemm import BK, EPILOGUES, HopperGemmOp
from mirage_xdsl.target.device import HOPPER_GEMM_ARCHS

HEADER = "mirage_xdsl/hopper_gemm.cuh"
_CTYPES = {Float16Type: ("half", "float16"), BFloat16Type: ("__nv_bfloat16", "bfloat16")}
_BARRIER_SLACK = 1024  # alignment of the ring to 1024 B (hopper_gemm.cuh: gemm_ws_smem_bytes)
_SPLIT_TICKETS = 16  # the split-K arrival words of the consumers (hopper_gemm.cuh: gemm_ws_smem_bytes)
_ORDER_BARRIERS = 16  # the two ping-pong order mbarriers (hopper_gemm.cuh: gemm_ws_smem_bytes)
_MUL_BARRIERS = 16  # the consumers' mbarriers of the MUL factor's TMA loads (hopper_gemm.cuh: gemm_ws_smem_bytes)


class HopperArchError(CudaEmitError):
    """A module with `cute.hopper_gemm` kernels compiled for an architecture without wgmma."""


def target_arch(module: ModuleOp, arch: str) -> str:
    """The architecture to compile `module` for, given the requested `arch` (normalized,
    e.g. `sm_90`): `sm_90a` when the module holds a `cute.hopper_gemm`, `cute.hopper_attention`
    or `cute.decode_attention` (kn-partition makes it only for sm_90 like the others) and
    `sm_90` was asked for -- wgmma and setmaxnreg exist only on the architecture-specific
    sm_90a target (PTX ISA, "wgmma.mma_async" target requirements), and sm_90a cubins run on
    every compute capability 9.0 GPU (H100, H200); `arch` unchanged otherwise.

    Raises:
        HopperArchError: such an op and a target other than sm_90/sm_90a (the
            message names the kernel and the fix: `mirage-transpile{arch=...}`).
    """
    gemm = next((op for op in module.walk() if isinstance(op, HopperGemmOp | HopperAttentionOp | DecodeAttentionOp)), None)
    if gemm is None or arch == "sm_90a":
        return arch
    if arch in HOPPER_GEMM_ARCHS:
        return "sm_90a"
    what = {HopperGemmOp: "TMA + wgmma GEMM", HopperAttentionOp: "wgmma flash attention"}.get(type(gemm), "split-key decode attention")
    raise HopperArchError(
        f"cuda target: {gemm.name} {gemm.kernel_name.data}: the {what} needs sm_90a, not {arch}; "
        f"compile with mirage-transpile{{arch={arch}}} (kn-partition then keeps such ops in generated kernels "
        "or library calls)"
    )


def element_names(op: Operation) -> tuple[str, str]:
    """(CUDA type, dtype name) of the 16-bit element type of `op`'s first result, e.g.
    ("half", "float16") -- the sm_90a kernels' (`cute.hopper_gemm`, `cute.hopper_attention`).

    Raises:
        ValueError: another element type (their verifiers reject it earlier).
    """
    tensor = op.results[0].type
    assert isinstance(tensor, TensorType)
    for cls, names in _CTYPES.items():
        if isinstance(tensor.element_type, cls):
            return names
    raise ValueError(f"{op.name}: element type {tensor.element_type} is not f16 or bf16")


def smem_bytes(op: HopperGemmOp) -> int:
    """Dynamic shared memory of the kernel: the ring, the staging tiles of a TMA-store
    epilogue (a whole tile per consumer under ping-pong), the mbarriers and the alignment
    slack (hopper_gemm.cuh: gemm_ws_smem_bytes)."""
    bm, bn, bk = op.ints("tile")
    stages = op.stages.value.data
    staging = bm * bn * 2 * (op.consumers.value.data if op.is_pingpong else 1) if op.epilogue.data == "tma_store" else 0
    return stages * (bm + bn) * bk * 2 + staging + 2 * stages * 8 + _ORDER_BARRIERS + _SPLIT_TICKETS + _MUL_BARRIERS + _BARRIER_SLACK


def threads(op: HopperGemmOp) -> int:
    """Threads per block: one producer warpgroup and `consumers` consumer warpgroups."""
    return 128 * (1 + op.consumers.value.data)


def print_hopper_gemm(op: HopperGemmOp) -> str:
    """The kernel's CUDA source (includes the header; several kernels may share one TU).

    Raises:
        ValueError: the element type is not f16/bf16 (the verifier rejects that earlier).
    """
    ctype, _ = element_names(op)
    m, n, k, b_in, b_out = op.ints("gemm")
    _, bn, _ = op.ints("tile")
    ldc, c_in, c_out = op.ints("out_strides")
    shape = f"{m}, {n}, {k}, {b_in * b_out}, {b_in}, {ldc}LL, {c_in}LL, {c_out}LL, {op.group_m.value.data}"
    epilogue = op.epilogue.data
    has_mul = op.mul is not None
    name = op.kernel_name.data
    act = f"{name}_act" if op.activation is not None else ""
    split = op.splits
    stream = op.stream_slots
    # trailing template arguments only as far as they differ from the header's defaults
    slabs = op.m_slabs
    tail = [
        str(2 if op.mul_by_tma else 1 if has_mul else 0),
        act or "mx::hopper::NoActivation",
        str(split),
        str(int(op.is_pingpong)),
        str(stream),
        str(slabs),
        str(int(op.shares_a)),
    ]
    defaults = ["0", "mx::hopper::NoActivation", "1", "0", "0", "1", "0"]  # MUL .. SHARE_A in gemm_ws
    keep = max((i + 1 for i, (t, d) in enumerate(zip(tail, defaults, strict=True)) if t != d), default=0)
    template = (
        f"{ctype}, {bn}, {op.stages.value.data}, {op.consumers.value.data}, "
        f"{1 if op.trans_b.value.data else 0}, {EPILOGUES[epilogue]}, {op.cluster.value.data}" + "".join(f", {t}" for t in tail[:keep])
    )
    # `const __restrict__ d` (read through the non-coherent cache) is sound because a
    # `cute.hopper_gemm` launches without PDL (`hopper_launch`): the kernel that wrote D is done
    params = f", const {ctype}* __restrict__ d" if has_mul else ""
    call_args = ", d" if has_mul else ", nullptr" if op.shares_tiles else ""
    if op.shares_tiles:
        params += ", float* __restrict__ ws, unsigned* __restrict__ cnt"
        call_args += ", ws, cnt"
    elif op.mul_by_tma:
        call_args += ", nullptr, nullptr, &dm"
    cluster = op.cluster.value.data
    dims = f"__cluster_dims__({cluster}, 1, 1) " if cluster > 1 else ""
    maps = "const __grid_constant__ CUtensorMap a, const __grid_constant__ CUtensorMap b"
    maps += ", const __grid_constant__ CUtensorMap cm" if epilogue == "tma_store" else ""
    maps += ", const __grid_constant__ CUtensorMap dm" if op.mul_by_tma else ""
    cmap = "&cm" if epilogue == "tma_store" else "nullptr"
    act_struct = []
    if act:
        assert op.activation is not None
        value = KernelPrinterBase.apply_epilogue("x", op.activation)
        act_struct = [
            '#include "mirage_xdsl/core.cuh"',
            f"struct {act} {{",
            "  static constexpr bool kIdentity = false;",
            f"  static __device__ __forceinline__ float apply(float x) {{ return {value}; }}",
            "};",
        ]
    return "\n".join(
        [
            f'#include "{HEADER}"',
            *act_struct,
            f'extern "C" __global__ void {dims}__launch_bounds__({threads(op)}, 1)',
            f"{name}({maps}, {ctype}* __restrict__ c{params}) {{",
            f"  mx::hopper::gemm_ws<{template}>(&a, &b, {cmap}, c, mx::hopper::GemmShape{{{shape}}}{call_args});",
            "}",
            "",
        ]
    )


def batch_strides(strides: list[int], span_bytes: int, elem: int) -> list[int]:
    """Byte strides of the batch dims; an absent dim (stride 0, size 1) gets the tensor's span."""
    return [s * elem if s else span_bytes for s in strides]


def tensor_span(value: SSAValue, elem: int) -> int:
    """Bytes of `value`'s tensor (`elem` bytes per element) rounded up to 16: the stride a TMA map
    gives a dim of size 1 (any multiple of 16 bytes is valid there)."""
    tensor = value.type
    assert isinstance(tensor, TensorType)
    total = 1
    for d in tensor.get_shape():
        total *= d
    return -(-total * elem // 16) * 16


def hopper_launch(op: HopperGemmOp, ref: Callable[[SSAValue, Operation], TensorRef], counters: int = 0) -> KernelLaunch:
    """The `KernelLaunch` of `op`: grid, block, shared memory, tensor maps and C's pointer
    (then D's; for split-K the partial tiles in the workspace and its arrival counters).

    Args:
        op: the kernel.
        ref: where a value lives (graph input/output/workspace), as the CUDA printer resolves it.
        counters: the first 32-bit word of the plan's counter buffer that a split GEMM's
            arrival counters take (`HopperGemmOp.counter_words` of them).

    Raises:
        ValueError: the element type is not f16/bf16.
    """
    _, dtype = element_names(op)
    elem = 2
    m, n, k, b_in, b_out = op.ints("gemm")
    bm, bn, _ = op.ints("tile")
    a_m, a_cin, a_cout = op.ints("a_strides")
    b_k, b_n, b_cin, b_cout = op.ints("b_strides")
    a_batch = batch_strides([a_cin, a_cout], tensor_span(op.lhs, elem), elem)
    b_batch = batch_strides([b_cin, b_cout], tensor_span(op.rhs, elem), elem)
    a_rows = bm // 2 if op.shares_a else bm  # a pair sharing A loads half of its rows each
    map_a = TensorMapSpec(ref(op.lhs, op), dtype, (k, m, b_in, b_out), (a_m * elem, *a_batch), (BK, a_rows, 1, 1))  # type: ignore[arg-type]
    if op.trans_b.value.data:
        map_b = TensorMapSpec(ref(op.rhs, op), dtype, (n, k, b_in, b_out), (b_k * elem, *b_batch), (64, BK, 1, 1))  # type: ignore[arg-type]
    else:
        rows = bn if op.shares_a else bn // op.cluster.value.data  # a pair sharing B loads half of the rows each
        map_b = TensorMapSpec(ref(op.rhs, op), dtype, (k, n, b_in, b_out), (b_n * elem, *b_batch), (BK, rows, 1, 1))  # type: ignore[arg-type]
    maps: tuple[TensorMapSpec, ...] = (map_a, map_b)
    if op.epilogue.data == "tma_store":
        ldc, c_in, c_out = op.ints("out_strides")
        c_batch = batch_strides([c_in, c_out], tensor_span(op.result, elem), elem)
        maps += (TensorMapSpec(ref(op.result, op), dtype, (n, m, b_in, b_out), (ldc * elem, *c_batch), (64, 64, 1, 1)),)  # type: ignore[arg-type]
    if op.mul_by_tma:  # D is laid out like C (the verifier's rule): C's geometry at D's address
        assert op.mul is not None
        d_batch = batch_strides([c_in, c_out], tensor_span(op.mul, elem), elem)
        maps += (TensorMapSpec(ref(op.mul, op), dtype, (n, m, b_in, b_out), (ldc * elem, *d_batch), (64, 64, 1, 1)),)  # type: ignore[arg-type]
    return KernelLaunch(
        op.kernel_name.data,
        (op.grid.value.data, 1, 1),
        (threads(op), 1, 1),
        smem_bytes(op),
        (ref(op.result, op),) + ((ref(op.mul, op),) if op.mul is not None else ()) + (_split_refs(op, counters) if op.shares_tiles else ()),
        pdl=False,
        tensor_maps=maps,
        sm90a=True,
    )


def _split_refs(op: HopperGemmOp, counters: int) -> tuple[TensorRef, TensorRef]:
    """The partial tiles (workspace at `scratch_offset`) and the arrival counters of a split- or stream-K GEMM."""
    assert op.scratch_offset is not None
    return TensorRef("workspace", 0, op.scratch_offset.value.data), TensorRef("counters", 0, 4 * counters)
