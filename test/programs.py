"""Plain numpy (float64) versions of Mirage's benchmark programs (mirage-notes 2.4 and 7).

Each `Program` names its inputs and shapes (the order of the saved muGraphs' `kn_input_op`s)
and computes the output(s) every candidate kernel graph of the matching muGraph file must
reproduce.  `PROGRAMS` maps a muGraph file stem (`rmsnorm_bs1`, ...) to its program.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np


def rms_norm(x: np.ndarray, ndims: int = 1) -> np.ndarray:
    """`x / sqrt(mean(x^2))` over the trailing `ndims` dims (Mirage: no epsilon, no gain)."""
    axes = tuple(range(x.ndim - ndims, x.ndim))
    return x / np.sqrt(np.mean(x * x, axis=axes, keepdims=True))


def silu(x: np.ndarray) -> np.ndarray:
    return x / (1.0 + np.exp(-x))


def _mm(X: np.ndarray, W: np.ndarray) -> np.ndarray:
    """`X @ W` for a short, wide X: OpenBLAS is ~2x faster on the transposed problem."""
    return (W.T @ X.T).T


def rmsnorm_linear(X: np.ndarray, W: np.ndarray) -> np.ndarray:
    """benchmark/rmsnorm.py: `matmul(rms_norm(X), W)`."""
    return _mm(rms_norm(X), W)


def gated_mlp(X: np.ndarray, W1: np.ndarray, W2: np.ndarray) -> np.ndarray:
    """benchmark/gated_mlp.py: `silu(X @ W1) * (X @ W2)`."""
    return silu(_mm(X, W1)) * _mm(X, W2)


def attention(Q: np.ndarray, K: np.ndarray, V: np.ndarray) -> np.ndarray:
    """GQA/MHA/MQA benchmarks: `(exp(Q K) / sum(exp(Q K), -1)) V` per batch; no max
    subtraction, no scaling (K is stored transposed: [batch, head_dim, seq])."""
    E = np.exp(Q @ K)
    return (E @ V) / E.sum(axis=-1, keepdims=True)  # = (E / sum E) @ V, one pass less


def qknorm_attention(Q: np.ndarray, K: np.ndarray, V: np.ndarray) -> np.ndarray:
    """benchmark/qknorm_gqa.py: `attention(rms_norm(Q, (64,)), K, rms_norm(V, (64,)))`
    (the benchmark normalises V, not K)."""
    return attention(rms_norm(Q), K, rms_norm(V))


def lora(X: np.ndarray, W: np.ndarray, A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """benchmark/lora.py: `X @ W + (X @ A) @ B`."""
    return _mm(X, W) + (X @ A) @ B


def norm_transformer(H: np.ndarray, X: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """benchmark/norm_transformer.py (nGPT-style): `rms(X + alpha * (rms(H) + X))`."""
    return rms_norm(X + alpha * (rms_norm(H) + X))


@dataclass(frozen=True)
class Program:
    """A benchmark program: input names and shapes (in muGraph input order) and its function."""

    name: str
    inputs: tuple[tuple[str, tuple[int, ...]], ...]
    fn: Callable[..., np.ndarray]
    scale: float = 1.0
    """magnitude of the random inputs (uniform(-scale, scale)); small for attention"""

    @property
    def shapes(self) -> list[tuple[int, ...]]:
        return [s for _, s in self.inputs]

    def random_inputs(self, seed: int) -> list[np.ndarray]:
        rng = np.random.default_rng(seed)
        out = []
        for shape in self.shapes:
            x = rng.random(shape)  # in place: no temporaries for the big weight matrices
            x *= 2.0 * self.scale
            x -= self.scale
            out.append(x)
        return out

    def __call__(self, *inputs: np.ndarray) -> np.ndarray:
        return self.fn(*inputs)


def _attn(name: str, batch: int, q_len: int, fn: Callable[..., np.ndarray] = attention) -> Program:
    return Program(
        name,
        (("Q", (batch, q_len, 64)), ("K", (batch, 64, 4096)), ("V", (batch, 4096, 64))),
        fn,
        scale=0.1,
    )


PROGRAMS: dict[str, Program] = {
    "rmsnorm_bs1": Program("rmsnorm_bs1", (("X", (2, 4096)), ("W", (4096, 6144))), rmsnorm_linear),
    "rmsnorm_bs8": Program("rmsnorm_bs8", (("X", (16, 4096)), ("W", (4096, 6144))), rmsnorm_linear),
    "gated_mlp": Program(
        "gated_mlp", (("X", (8, 4096)), ("W1", (4096, 4096)), ("W2", (4096, 4096))), gated_mlp, scale=0.1
    ),
    "single_gated_mlp": Program(
        "single_gated_mlp", (("X", (8, 4096)), ("W1", (4096, 4096)), ("W2", (4096, 4096))), gated_mlp, scale=0.1
    ),
    "gqa_bs1": _attn("gqa_bs1", 2, 256),
    "gqa_bs8": _attn("gqa_bs8", 16, 256),
    "mha_bs1": _attn("mha_bs1", 32, 16),
    "mha_bs8": _attn("mha_bs8", 256, 16),
    "mqa_bs1": _attn("mqa_bs1", 1, 1024),
    "single_mqa_bs1": _attn("single_mqa_bs1", 1, 1024),
    "mqa_bs8": _attn("mqa_bs8", 8, 1024),
    "qknorm_gqa_bs1": _attn("qknorm_gqa_bs1", 2, 256, qknorm_attention),
    "qknorm_gqa_bs8": _attn("qknorm_gqa_bs8", 16, 256, qknorm_attention),
    "lora": Program(
        "lora", (("X", (16, 256)), ("W", (256, 4096)), ("A", (256, 16)), ("B", (16, 4096))), lora
    ),
    "single_lora": Program(
        "single_lora", (("X", (16, 256)), ("W", (256, 4096)), ("A", (256, 16)), ("B", (16, 4096))), lora
    ),
    "ntrans_bs1": Program("ntrans_bs1", (("H", (8, 4096)), ("X", (8, 4096)), ("alpha", (8, 4096))), norm_transformer),
    "ntrans_bs8": Program(
        "ntrans_bs8", (("H", (64, 4096)), ("X", (64, 4096)), ("alpha", (64, 4096))), norm_transformer
    ),
    # benchmark/saved_mugraphs/norm_transformer_bs1.json: the same program with ONE row (grid (1,1,1))
    "norm_transformer_bs1": Program(
        "norm_transformer_bs1", (("H", (1, 4096)), ("X", (1, 4096)), ("alpha", (1, 4096))), norm_transformer
    ),
}


def relative_error(out: np.ndarray, ref: np.ndarray) -> float:
    """`max|out - ref| / max|ref|` (inf on a shape mismatch)."""
    if out.shape != ref.shape:
        return float("inf")
    denom = float(np.max(np.abs(ref))) or 1.0
    return float(np.max(np.abs(out - ref))) / denom


def match_output(outputs: Sequence[np.ndarray], ref: np.ndarray) -> np.ndarray:
    """The graph output that corresponds to the program's result: the one with its shape."""
    same = [o for o in outputs if o.shape == ref.shape]
    if len(same) != 1:
        raise AssertionError(
            f"expected exactly one output of shape {ref.shape}, got shapes {[o.shape for o in outputs]}"
        )
    return same[0]
