"""Add the hand-written late-finisher split-K kernels of rmsnorm bs8 to a prepared bench directory.

    mirage-bench --prepare-only prep/ --workloads rmsnorm_bs8 --files examples/rmsnorm_linear_bs8.mlir --variants c0xr
    python experiments/plans/late_finisher_split_k.py prep/ [--ablate]   # here: nvcc builds the cubins
    python tools/mirage_bench.py report.md --from prep/ --no-compile-peer   # on the GPU

Each configuration of `late_finisher_split_k.cuh` becomes a candidate
`rmsnorm_linear_bs8@lfsk-<name>` beside the prepared c0xr plan (same inputs, reference and
check): c0xr's grid (96, 4) of 128 threads, the partners' E0, E1, E2 K stages, S ring
stages, the finisher's loads of the partners' words D stages before its loop ends, and the
flags of CONFIGS.  The partners' partials live in the plan's grid-sum counter buffer, which
the runtime zeroes once and every launch leaves zero again.  Findings: benchmarks/EXPERIMENTS.md (late finisher, 2026-11-25).
"""
import sys
from pathlib import Path

from prepared_candidates import PreparedWorkload  # this directory is on sys.path when run as a script

# (E0, E1, E2) partner stages (finisher: 64 - their sum), S ring stages, D early-load lead,
# flags: m = the sum of squares on the tensor cores, l = the partials' words with an L2
# evict_last policy, b = one barrier per stage, f = the finisher at blockIdx.y 0 (dispatched first),
# w = W's cp.async with an L2 evict_first policy
CONFIGS = [
    ((16, 16, 16), 5, 0, ""),  # equal splits, c0xr's loop: the control
    ((15, 15, 15), 7, 1, "ml"),
    ((15, 15, 15), 7, 1, ""), ((15, 15, 15), 7, 1, "m"), ((15, 15, 15), 7, 1, "l"), ((15, 15, 15), 7, 0, "ml"),
    ((15, 15, 15), 7, 2, "ml"), ((14, 14, 14), 7, 1, "ml"), ((16, 16, 16), 7, 1, "ml"), ((15, 15, 14), 7, 1, "ml"),
    ((15, 15, 15), 6, 1, "ml"), ((15, 15, 15), 7, 1, "mlf"), ((15, 15, 15), 7, 1, "mlb"),
    ((15, 15, 15), 7, 1, "mlw"),  # the fastest (13.3-13.4 µs on the H200)
    ((14, 14, 14), 7, 1, "mlw"), ((15, 15, 15), 6, 1, "mlw"),
]
ABLATED = [((15, 15, 15), 7, 1, "ml")]
ABLATIONS = {"noWait": 1, "noPub": 3}  # the header's ABLATE bits
PARTIAL_WORDS = 96 * 3 * (16 + 16 * 64)  # column tiles x partners x (row sums + [16, 64] tile)


def name(e: tuple[int, int, int], s: int, d: int, flags: str, what: str = "") -> str:
    es = f"e{e[0]}" if len(set(e)) == 1 else "e" + "_".join(map(str, e))
    return f"{es}s{s}d{d}{flags}" + (f"-{what}" if what else "")


def smem_bytes(s: int) -> int:
    """The kernel's dynamic shared memory: 128-byte header, S ring stages of X [16, 64] and
    W [64, 64] fp16, 16 bytes c0xr keeps for its arrival flag (the epilogue tiles reuse the ring)."""
    return 128 + s * (16 * 64 + 64 * 64) * 2 + 16


def kernel_source(header: str, kernel: str, e: tuple[int, int, int], s: int, d: int, flags: str, ablate: int = 0) -> str:
    """`header` with one instance of LFSK_KERNEL for this configuration."""
    m, el, ob, first, wef = (str(f in flags).lower() for f in "mlbfw")
    return header + f"\nLFSK_KERNEL({kernel}, {e[0]}, {e[1]}, {e[2]}, {s}, {d}, {ablate}, {m}, {el}, {ob}, {first}, {wef})\n"


def main(prep: Path, ablate: bool = False) -> None:
    header = (Path(__file__).parent / "late_finisher_split_k.cuh").read_text()
    workload = PreparedWorkload(prep, "rmsnorm_bs8", "rmsnorm_linear_bs8@c0xr")
    builds = [(*c, "", 0) for c in CONFIGS]
    if ablate:
        builds += [(*c, what, bits) for c in ABLATED for what, bits in ABLATIONS.items()]
    for e, s, d, flags, what, bits in builds:
        tag = name(e, s, d, flags, what)
        kernel = f"lfsk_{tag}".replace("-", "_")
        workload.add(f"lfsk-{tag}", kernel, kernel_source(header, kernel, e, s, d, flags, bits), counters=PARTIAL_WORDS,
                     launch=dict(grid=[96, 4, 1], block=[128, 1, 1], smem_bytes=smem_bytes(s), one_wave=True))
    workload.save()


if __name__ == "__main__":
    main(Path(sys.argv[1]), "--ablate" in sys.argv[2:])
