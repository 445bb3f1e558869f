"""The tuner's search space as data: one gene per field of the tuning point (target/tuning.py).

    space = SPACE
    g = genome_from_label("c0s7xrf1")      # the variant strings of mirage-bench stay readable
    g.spec()                               # -> MirageTranspilePass(tuning=g.spec())
    space.repair(g)                        # the canonical genome of a possibly invalid one

Genes (`TuningPoint`, forwarded by `mirage-transpile{tuning=...}`):

| gene | domain | what |
|---|---|---|
| `candidate` | 0..15 | kn-fuse plan of that cost rank (ranks past the last plan fall back inside kn-fuse) |
| `stages` | 0, 2..8 | cp.async pipeline depth; 0 = tb-plan-pipeline's own choice |
| `always_split` | no/yes | split-K plans also when an unsplit grid already fills the SMs |
| `grid_sum` | no/yes | split-K partials combined inside the kernel (`tb.grid_sum`) |
| `reduce_partials` | no/yes | a split block's accumulator reduced before its grid sum |
| `late_finisher` | 0..3 | iterations each split-K partner hands to its finisher; 0 = off |
| `lone_block_max_stages` | 2..6 | ring depth of wide lone blocks (plan estimate and kernel) |
| `online_softmax` | no/yes | a max read inside the loop as a running max (one kernel) |
| `flash_attention` | no/yes | an attention group as the sm_90a flash-attention kernel where estimated faster |

Validity rules (`violations`; `repair` applies them, so equivalent genomes get one form):
a value outside its domain is invalid (repair: the nearest value of the domain);
`late_finisher` and `reduce_partials` act on grid sums only, so without `grid_sum` they must
be off (repair: set them off).  Rules that only the compiler can decide (a plan rank past the
last plan, a ring deeper than shared memory allows) are left to evaluation: such a genome
fails to compile (fitness 0) or prints the same kernel as another (memoised by its source).

Labels: the variant syntax of `mirage-bench --variants`, `c<rank>[s<stages>][x][r][f<shift>]`,
extended with `n` (no grid sum), `l<depth>` (lone-block ring depth other than 4), `o` (online
softmax) and `g` (generated attention kernels: no sm_90a flash kernel); old strings read as
before (absent letters = off, grid sums and the flash kernel on, the default lone-block depth).

Needs no xDSL (the GPU phase of mirage-bench imports this module through bench/prepare.py).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from mirage_xdsl.target.cost_model import LONE_BLOCK_MAX_STAGES
from mirage_xdsl.target.tuning import TuningError, TuningPoint

DEFAULT_LONE_BLOCK_MAX_STAGES = LONE_BLOCK_MAX_STAGES
"""The lone-block ring depth of the default pipeline (a label writes `l<depth>` only for others)."""


class SpaceError(TuningError):
    """A label or option set that names no genome of the space."""


@dataclass(frozen=True)
class Gene:
    """One tunable decision: the pass option it sets and the values it may take.

    Attributes:
        name: the `MirageTranspilePass` option (and `Genome` field) it sets.
        domain: the values it may take, in order (repair moves to the nearest one).
        doc: what the gene decides, in one line.
    """

    name: str
    domain: tuple[Any, ...]
    doc: str


GENES: tuple[Gene, ...] = (
    Gene("candidate", tuple(range(16)), "kn-fuse plan of this cost rank"),
    Gene("stages", (0, 2, 3, 4, 5, 6, 7, 8), "cp.async pipeline depth (0: automatic)"),
    Gene("always_split", (False, True), "split-K plans even when the unsplit grid fills the SMs"),
    Gene("grid_sum", (False, True), "split-K partials combined inside the kernel"),
    Gene("reduce_partials", (False, True), "reduce a split block's accumulator before its grid sum"),
    Gene("late_finisher", (0, 1, 2, 3), "iterations each split-K partner hands to its finisher (0: off)"),
    Gene("lone_block_max_stages", (2, 3, 4, 5, 6), "ring depth of wide lone blocks"),
    Gene("online_softmax", (False, True), "a max read inside the loop as a running max (one kernel)"),
    Gene("flash_attention", (False, True), "an attention group as the sm_90a flash kernel where estimated faster"),
)


@dataclass(frozen=True, order=True)
class Genome(TuningPoint):
    """One point of the space: a `TuningPoint` (target/tuning.py; field names = pass option
    names) with the variant label mirage-bench prints.  `Genome()` is the pipeline's default,
    `c0xrf1` (a label's absent letters mean off)."""

    def variant_options(self) -> dict[str, Any]:
        """The options as `mirage-bench`'s `parse_variant` has always returned them (five
        keys), plus `grid_sum` / `lone_block_max_stages` where they differ from the default."""
        out = {k: getattr(self, k) for k in ("candidate", "stages", "always_split", "reduce_partials", "late_finisher")}
        if not self.grid_sum:
            out["grid_sum"] = False
        if self.lone_block_max_stages != DEFAULT_LONE_BLOCK_MAX_STAGES:
            out["lone_block_max_stages"] = self.lone_block_max_stages
        if self.online_softmax:
            out["online_softmax"] = True
        if not self.flash_attention:
            out["flash_attention"] = False
        return out

    @property
    def label(self) -> str:
        """The variant string of this genome (`c0s7xrf1`, `c3xn`, `c1l6`, `c0xo`, ...)."""
        text = f"c{self.candidate}"
        text += f"s{self.stages}" if self.stages else ""
        text += "x" if self.always_split else ""
        text += "r" if self.reduce_partials else ""
        text += f"f{self.late_finisher}" if self.late_finisher else ""
        text += "" if self.grid_sum else "n"
        if self.lone_block_max_stages != DEFAULT_LONE_BLOCK_MAX_STAGES:
            text += f"l{self.lone_block_max_stages}"
        text += "o" if self.online_softmax else ""
        text += "" if self.flash_attention else "g"
        return text

    def __str__(self) -> str:
        return self.label


_LABEL = re.compile(r"c(\d+)(?:s(\d+))?(x?)(r?)(?:f(\d+))?(n?)(?:l(\d+))?(o?)(g?)")


def genome_from_label(text: str) -> Genome:
    """The genome of a variant string `c<rank>[s<stages>][x][r][f<shift>][n][l<depth>][o][g]`
    (the genome as written, not repaired: see `Space.repair`).

    Raises:
        SpaceError: the text does not follow the syntax.
    """
    m = _LABEL.fullmatch(text.strip())
    if m is None:
        raise SpaceError(
            f"variant '{text}': expected c<rank>[s<stages>][x][r][f<shift>][n][l<depth>][o][g], e.g. c0, c0s2, c3s4x or c0s7xrf1"
        )
    return Genome(
        candidate=int(m[1]),
        stages=int(m[2]) if m[2] is not None else 0,
        always_split=bool(m[3]),
        reduce_partials=bool(m[4]),
        late_finisher=int(m[5]) if m[5] is not None else 0,
        grid_sum=not m[6],
        lone_block_max_stages=int(m[7]) if m[7] is not None else DEFAULT_LONE_BLOCK_MAX_STAGES,
        online_softmax=bool(m[8]),
        flash_attention=not m[9],
    )


def genome_from_options(options: dict[str, Any]) -> Genome:
    """The genome of a dict of pass options (missing keys: the genome defaults).

    Raises:
        SpaceError: an unknown option or a value of the wrong type.
    """
    try:
        point = TuningPoint.from_options(options)
    except TuningError as err:
        raise SpaceError(str(err)) from None
    return Genome(**point.options())


SEED_VARIANTS: tuple[str, ...] = (
    tuple(f"c{rank}x" for rank in range(16))
    + ("c0s3x", "c0s4x")
    + tuple(f"c{rank}xr" for rank in range(8))
    + ("c0xrf1", "c0s7xrf1", "c0xo")
)
"""The hand-picked variants `mirage-bench` has swept (its `DEFAULT_VARIANTS`, see
bench/prepare.py for the measurements behind them): the tuner starts from them."""


@dataclass(frozen=True)
class Space:
    """The genes and their validity rules; the GA (genetic.py) draws, mixes and repairs
    genomes through this object only."""

    genes: tuple[Gene, ...] = GENES

    def gene(self, name: str) -> Gene:
        """The gene of pass option `name`.

        Raises:
            StopIteration: the space has no gene of that name.
        """
        return next(g for g in self.genes if g.name == name)

    def violations(self, genome: Genome) -> list[str]:
        """Why `genome` is not a valid point of the space (empty: valid)."""
        out = [
            f"{g.name}={getattr(genome, g.name)!r} is not one of {list(g.domain)}"
            for g in self.genes
            if getattr(genome, g.name) not in g.domain
        ]
        if not genome.grid_sum and genome.late_finisher:
            out.append("late_finisher needs grid_sum (a late finisher combines in-kernel split-K groups)")
        if not genome.grid_sum and genome.reduce_partials:
            out.append("reduce_partials needs grid_sum (it shrinks the partials of a grid sum)")
        return out

    def repair(self, genome: Genome) -> Genome:
        """The valid genome closest to `genome`: out-of-domain values moved to the nearest
        domain value, options without effect switched off (one form per distinct kernel
        request, so duplicates are caught before compiling)."""
        changes: dict[str, Any] = {}
        for g in self.genes:
            value = getattr(genome, g.name)
            if value not in g.domain:
                changes[g.name] = min(g.domain, key=lambda v: (abs(int(v) - int(value)), int(v)))
        fixed = replace(genome, **changes)
        if not fixed.grid_sum:
            fixed = replace(fixed, late_finisher=0, reduce_partials=False)
        return fixed

    def validate(self, genome: Genome) -> Genome:
        """`genome` if valid.

        Raises:
            SpaceError: naming every violated rule.
        """
        problems = self.violations(genome)
        if problems:
            raise SpaceError(f"genome {genome.label}: " + "; ".join(problems))
        return genome

    def size(self) -> int:
        """Number of genomes of the space before the validity rules (an upper bound)."""
        n = 1
        for g in self.genes:
            n *= len(g.domain)
        return n

    def seeds(self, variants: Sequence[str] = SEED_VARIANTS) -> list[Genome]:
        """The seed genomes (from `variants`), repaired and without duplicates, ordered so
        that a small population still gets a mix: the pipeline's default (`Genome()`, when a
        variant names it) first, so every search measures it; then by plan rank, plain before
        the stage/partials/finisher variants of that rank.

        Raises:
            SpaceError: a variant string does not follow the label syntax.
        """
        genomes = list(dict.fromkeys(self.repair(genome_from_label(v)) for v in variants))
        return sorted(genomes, key=lambda g: (g != Genome(), g.candidate, g.stages != 0, g.reduce_partials, g.late_finisher))


SPACE = Space()
