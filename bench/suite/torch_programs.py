"""The torch programs of the program suite: the peers `mirage-bench` times each suite workload
against (torch eager, CUDA graph, torch.compile), written as a torch user would.

Each takes the tensors in the argument order of the kernel graph of `bench/suite/graphs.py`
(same shapes; a [1, hidden] gain is a [1, hidden] tensor) and returns the graph's output (a
tuple where the graph has several).  Normalisations use `eps=0` like the graphs (Mirage's
`rms_norm` has no epsilon); attention keys come as the [heads, head_dim, keys] view of a
[heads, keys, head_dim] tensor (the graphs' strides), so `k.transpose(-1, -2)` is contiguous.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def softmax(x: Any) -> Any:
    """`torch.softmax` over the last dim."""
    import torch  # type: ignore[import-not-found]

    return torch.softmax(x, dim=-1)


def layernorm(x: Any, g: Any, b: Any) -> Any:
    """`F.layer_norm` over the last dim, gain and bias, eps 0."""
    import torch

    return torch.nn.functional.layer_norm(x, (x.shape[-1],), g[0], b[0], eps=0.0)


def _rms(x: Any) -> Any:
    """RMSNorm without gain, computed in fp32 (fp16/bf16 upcast, as Llama's `RMSNorm` does),
    cast back."""
    import torch

    xf = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True))).to(x.dtype)


def rmsnorm(x: Any, g: Any) -> Any:
    """Llama's RMSNorm (no epsilon): `rms(x) * g`."""
    return _rms(x) * g


def add_rmsnorm(x: Any, r: Any, g: Any) -> Any:
    """Residual add, then RMSNorm: `(rms(x + r) * g, x + r)`."""
    h = x + r
    return _rms(h) * g, h


def gelu_mlp(x: Any, w1: Any, w2: Any) -> Any:
    """`gelu(x @ w1) @ w2` (exact erf GELU, torch's default)."""
    import torch

    return torch.nn.functional.gelu(x @ w1) @ w2


def swiglu_mlp(x: Any, w1: Any, w3: Any, w2: Any) -> Any:
    """Llama's MLP: `(silu(x @ w1) * (x @ w3)) @ w2`."""
    import torch

    return (torch.nn.functional.silu(x @ w1) * (x @ w3)) @ w2


def _sdpa(q: Any, k: Any, v: Any, causal: bool = False) -> Any:
    """`scaled_dot_product_attention` (FlashAttention / memory-efficient kernels where they
    apply) of q [h, rows, d], k [h, d, keys] (transposed back: a contiguous [h, keys, d]),
    v [h, keys, d], as one batch of h heads; `causal`: `is_causal=True` (the lower triangle;
    the suite's causal programs have as many queries as keys)."""
    import torch

    qkv = (q[None], k.transpose(-1, -2)[None], v[None])
    return torch.nn.functional.scaled_dot_product_attention(*qkv, is_causal=causal)[0]


def decode_attention(q: Any, k: Any, v: Any) -> Any:
    """Decode attention: each KV head's query heads are the rows of q."""
    return _sdpa(q, k, v)


def prefill_attention(q: Any, k: Any, v: Any) -> Any:
    """Prefill attention, not causal."""
    return _sdpa(q, k, v)


def prefill_attention_causal(q: Any, k: Any, v: Any) -> Any:
    """Prefill attention, causal (`is_causal=True`)."""
    return _sdpa(q, k, v, causal=True)


def rotary(x: Any, c: Any, s: Any) -> Any:
    """Rotary embedding, rotate-half form: `cat(x1 c - x2 s, x2 c + x1 s)`."""
    import torch

    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1)


def bmm_nt(a: Any, b: Any) -> Any:
    """`a @ b` where b is the transposed view of a [batch, n, k] tensor (cuBLAS's NT GEMM)."""
    return a @ b


def reduce_sum(x: Any, dim: int) -> Any:
    """Sum over `dim`, kept."""
    return x.sum(dim=dim, keepdim=True)


def lora(x: Any, w: Any, a: Any, b: Any) -> Any:
    """`x @ w + (x @ a) @ b`."""
    return x @ w + (x @ a) @ b


def cross_entropy(x: Any, p: Any) -> Any:
    """`F.cross_entropy(x, p, reduction="none")` with target probabilities, as [rows, 1]."""
    import torch

    return torch.nn.functional.cross_entropy(x, p, reduction="none").unsqueeze(-1)


PROGRAMS: dict[str, Callable[..., Any]] = {
    "softmax": softmax,
    "layernorm": layernorm,
    "rmsnorm": rmsnorm,
    "add_rmsnorm": add_rmsnorm,
    "gelu_mlp": gelu_mlp,
    "swiglu_mlp": swiglu_mlp,
    "decode_attention": decode_attention,
    "prefill_attention": prefill_attention,
    "prefill_attention_causal": prefill_attention_causal,
    "rotary": rotary,
    "bmm_nt": bmm_nt,
    "reduce_sum": reduce_sum,
    "lora": lora,
    "cross_entropy": cross_entropy,
}


def torch_program(workload: str) -> Callable[..., Any] | None:
    """The torch program of suite workload `workload` (sizes that are not tensors, such as
    the reduced dim, bound), or None if it is not a suite workload."""
    from mirage_xdsl.bench.suite.table import SUITE_BY_NAME

    w = SUITE_BY_NAME.get(workload)
    if w is None:
        return None
    fn = PROGRAMS[w.program]
    if w.program == "reduce_sum":
        dim = int(w.sizes["dim"])
        return lambda x: reduce_sum(x, dim)
    return fn
