"""The genetic search, independent of GPUs: it sees genomes (space.py) and an `Evaluator`.

    search = GeneticSearch(SPACE, evaluator, GAConfig(population=20, generations=5, seed=1))
    outcome = search.run()          # outcome.best: the fastest correct genome, or None

The algorithm follows Tensor Comprehensions' autotuner (defaults: population 100, 25
generations, crossover 80 %, mutation 7 %, 10 elites):

- generation 0: the space's seed genomes (up to `seed_fraction` of the population) and
  random genomes;
- fitness = 1 / time (µs); a genome that failed to build, to run or the reference check has
  fitness 0: reported, never an elite, never the best, drawn as a parent only when no genome
  of the population has a positive fitness;
- next generation: the `elites` fittest distinct genomes unchanged, then children: with
  probability `crossover_rate` each gene is taken from one of `parents` parents drawn by
  roulette (probability proportional to fitness), else a copy of one such parent; then each
  gene mutates to another value of its domain with probability `mutation_rate`; then the
  space repairs the child (validity rules);
- every random choice comes from one `random.Random(seed)`, so a run is reproducible given
  the same evaluations (a resumed run replays the same generations).

Evaluation is two-phase so that duplicates cost nothing: a genome already evaluated (this run
or an earlier one, `known`) is not evaluated again, and a genome whose build prints the same
program (CUDA source + launch plan digest) as an evaluated one takes that one's time without
being timed.  `stop()` is polled between steps: once it is true the builds already running
finish, nothing new starts, and `run` returns what it has (SIGINT, time budget).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any, Protocol

from mirage_xdsl.driver.tune.space import Genome, Space


@dataclass(frozen=True)
class GAConfig:
    """Parameters of the search.

    The defaults of `population`, `generations`, `crossover_rate`, `mutation_rate` and
    `elites` are Tensor Comprehensions' (facebookresearch/TensorComprehensions,
    `tc/core/flags.cc`: `tuner_gen_pop_size` 100, `tuner_gen_generations` 25,
    `tuner_gen_crossover_rate` 80 %, `tuner_gen_mutation_rate` 7 %, `tuner_gen_number_elites` 10).

    Attributes:
        population: genomes per generation.
        generations: generations to run (generation 0 included).
        crossover_rate: probability (0..1) that a child is a crossover, not a copy.
        mutation_rate: probability (0..1) that each gene of a child mutates.
        elites: fittest distinct genomes kept unchanged into the next generation.
        seed: seed of the search's `random.Random`.
    """

    population: int = 100
    generations: int = 25
    crossover_rate: float = 0.8
    mutation_rate: float = 0.07
    elites: int = 10
    parents: int = 3
    """parents of a crossover child; each gene is taken from one of them"""
    seed_fraction: float = 0.5
    """at most this share of generation 0 comes from the space's seed genomes"""
    seed: int = 0

    def checked(self) -> GAConfig:
        """This config if its values make sense.

        Raises:
            ValueError: naming the first bad parameter.
        """
        if self.population < 1 or self.generations < 1 or self.parents < 1:
            raise ValueError("population, generations and parents must be at least 1")
        if not 0 <= self.elites <= self.population:
            raise ValueError(f"elites must be between 0 and the population ({self.population})")
        for name in ("crossover_rate", "mutation_rate", "seed_fraction"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be between 0 and 1")
        return self


DEFAULT_CONFIG = GAConfig()


@dataclass(frozen=True)
class Build:
    """A genome after the CPU phase (pipeline, CUDA printer, nvcc)."""

    genome: Genome
    program: str | None = None
    """digest of the generated program (CUDA source and launch plan); None when it failed"""
    error: str | None = None
    transient: bool = False
    """the failure may not happen again (no nvcc, a timeout, an interrupted worker): not cached"""
    payload: Any = None
    """whatever the evaluator needs to measure it (plan JSON, cubin path)"""


@dataclass(frozen=True)
class Evaluation:
    """The verdict on one genome: its time, or why it has none."""

    genome: Genome
    time_us: float | None = None
    """median device time of one run (µs); None when it failed"""
    error: str | None = None
    program: str | None = None
    transient: bool = False
    origin: str = "measured"
    """`measured` (run on the device), `build` (failed before), `cache` (an earlier run) or
    `same program as <label>`"""

    @property
    def ok(self) -> bool:
        """Whether the genome passed: no error and a positive time."""
        return self.error is None and self.time_us is not None and self.time_us > 0

    @property
    def fitness(self) -> float:
        """1 / time (1/µs); 0 for a failed genome."""
        return 1.0 / self.time_us if self.ok and self.time_us else 0.0


class Evaluator(Protocol):
    """What the search needs from the outside world; evaluate.py has the GPU one, the tests
    and `mirage-tune --fake-evaluator` a synthetic one."""

    def build(self, genomes: Sequence[Genome], stop: Callable[[], bool]) -> Iterable[Build]:
        """Build `genomes` (in any order, possibly in parallel); yield one `Build` each.
        Once `stop()` is true, builds not yet started may be dropped (no `Build` for them)."""
        ...

    def measure(self, build: Build) -> Evaluation:
        """Check a successful build against the reference and time it."""
        ...


@dataclass
class GenerationReport:
    """Where the search stands after one generation."""

    generation: int
    """0-based"""
    best: Evaluation | None
    """the fastest correct genome so far"""
    evaluated: int
    """distinct genomes with a verdict (this run and `known`)"""
    failed: int
    """of those, how many failed"""
    new: int
    """genomes given a verdict in this generation"""
    elapsed_s: float
    """seconds since `run` started"""


@dataclass
class Outcome:
    """The result of `GeneticSearch.run`."""

    best: Evaluation | None
    evaluations: dict[Genome, Evaluation]
    generations: list[GenerationReport] = field(default_factory=list)
    stopped: bool = False
    """`stop()` ended the search before its last generation"""


def best_of(evaluations: Iterable[Evaluation]) -> Evaluation | None:
    """The fastest correct evaluation (ties: the smaller genome), None when none passed."""
    ok = [e for e in evaluations if e.ok]
    return min(ok, key=lambda e: (e.time_us, e.genome)) if ok else None


class GeneticSearch:
    """One genetic search over `space` with `evaluator` (see the module docstring).

    Args:
        space: the genes and validity rules (`SPACE`).
        evaluator: builds and measures genomes (`Evaluator` protocol).
        config: the search parameters (checked here).
        known: verdicts of earlier runs (the tuning cache): not evaluated again, and their
            programs lend their times to genomes that print the same program.
        stop: polled between steps; once true, work in flight finishes and nothing new starts.
        on_evaluation: called with each new verdict.
        on_generation: called with the report of each finished generation.

    Raises:
        ValueError: `config` has a bad parameter (`GAConfig.checked`).
    """

    def __init__(
        self,
        space: Space,
        evaluator: Evaluator,
        config: GAConfig = DEFAULT_CONFIG,
        *,
        known: Iterable[Evaluation] = (),
        stop: Callable[[], bool] = lambda: False,
        on_evaluation: Callable[[Evaluation], None] | None = None,
        on_generation: Callable[[GenerationReport], None] | None = None,
    ):
        self.space = space
        self.evaluator = evaluator
        self.config = config.checked()
        self.stop = stop
        self.on_evaluation = on_evaluation
        self.on_generation = on_generation
        self.rng = random.Random(config.seed)
        self.memo: dict[Genome, Evaluation] = {}
        self.by_program: dict[str, Evaluation] = {}
        for ev in known:
            self._remember(ev)
        self._start = time.monotonic()

    # -- the loop -----------------------------------------------------------------------

    def run(self) -> Outcome:
        """Run the generations (or until `stop()`); return the best genome and every verdict.

        Exceptions of the evaluator and the callbacks are not caught (e.g. `DeviceBroken`
        of the GPU evaluator): the verdicts so far stay in `self.memo`.
        """
        outcome = Outcome(None, self.memo)
        population = self.initial_population()
        for gen in range(self.config.generations):
            if self.stop():
                outcome.stopped = True
                break
            new = self.evaluate(population)
            report = self._report(gen, new)
            outcome.generations.append(report)
            if self.on_generation is not None:
                self.on_generation(report)
            if self.stop():
                outcome.stopped = gen + 1 < self.config.generations
                break
            if gen + 1 < self.config.generations:
                population = self.next_population(population)
        outcome.best = best_of(self.memo.values())
        return outcome

    def _report(self, gen: int, new: int) -> GenerationReport:
        failed = sum(not e.ok for e in self.memo.values())
        return GenerationReport(gen, best_of(self.memo.values()), len(self.memo), failed, new, time.monotonic() - self._start)

    # -- populations --------------------------------------------------------------------

    def random_genome(self) -> Genome:
        """A uniformly drawn genome, repaired."""
        values = {g.name: self.rng.choice(g.domain) for g in self.space.genes}
        return self.space.repair(Genome(**values))

    def initial_population(self) -> list[Genome]:
        """Seeds (at most `seed_fraction` of the population), then distinct random genomes."""
        size = self.config.population
        n_seeds = min(size, int(round(size * self.config.seed_fraction)) or 1)
        population = self.space.seeds()[:n_seeds]
        self._fill(population, self.random_genome)
        return population

    def next_population(self, population: Sequence[Genome]) -> list[Genome]:
        """Elites, then children of roulette-drawn parents (see the module docstring)."""
        scored = [self.memo[g] for g in dict.fromkeys(population) if g in self.memo]
        elites = sorted((e for e in scored if e.ok), key=lambda e: (e.time_us, e.genome))[: self.config.elites]
        nxt = [e.genome for e in elites]
        pool = [g for g in population if g in self.memo] or list(population)
        weights = [self.memo[g].fitness if g in self.memo else 0.0 for g in pool]
        if sum(weights) <= 0:
            weights = [1.0] * len(pool)  # nothing passed yet: every genome is as good a parent
        self._fill(nxt, lambda: self.child(pool, weights))
        return nxt

    def _fill(self, population: list[Genome], draw: Callable[[], Genome]) -> None:
        """Append `draw()` results until the population is full, skipping genomes it already
        holds (after many tries, in a small space, duplicates are accepted: they cost nothing)."""
        tries = 0
        seen = set(population)
        while len(population) < self.config.population:
            genome = draw()
            tries += 1
            if genome in seen and tries < 50 * self.config.population:
                continue
            seen.add(genome)
            population.append(genome)

    def child(self, pool: Sequence[Genome], weights: Sequence[float]) -> Genome:
        """One child: crossover (or a copy) of roulette-drawn parents, mutated, repaired."""
        cfg = self.config
        if self.rng.random() < cfg.crossover_rate:
            parents = self.rng.choices(pool, weights=weights, k=cfg.parents)
            values = {f.name: getattr(self.rng.choice(parents), f.name) for f in fields(Genome)}
        else:
            values = dict(self.rng.choices(pool, weights=weights, k=1)[0].options())
        for gene in self.space.genes:
            if self.rng.random() < cfg.mutation_rate:
                others = [v for v in gene.domain if v != values[gene.name]] or list(gene.domain)
                values[gene.name] = self.rng.choice(others)
        return self.space.repair(Genome(**values))

    # -- evaluation ---------------------------------------------------------------------

    def evaluate(self, genomes: Sequence[Genome]) -> int:
        """Give every genome of `genomes` a verdict (memoised); return how many were new."""
        todo = [g for g in dict.fromkeys(genomes) if g not in self.memo]
        if not todo or self.stop():
            return 0
        builds = {b.genome: b for b in self.evaluator.build(todo, self.stop)}
        new = 0
        for genome in todo:  # request order, whatever order the builds finished in
            build = builds.get(genome)
            if build is None:
                continue  # dropped after stop()
            if build.error is None and self.stop():
                break  # in-flight work is done; timing a new candidate would start new work
            self._remember(self._verdict(build))
            new += 1
            if self.on_evaluation is not None:
                self.on_evaluation(self.memo[genome])
        return new

    def _verdict(self, build: Build) -> Evaluation:
        if build.error is not None or build.program is None:
            error = build.error or "the build produced no program"
            return Evaluation(build.genome, None, error, None, build.transient, origin="build")
        same = self.by_program.get(build.program)
        if same is not None:
            return replace(same, genome=build.genome, origin=f"same program as {same.genome.label}")
        ev = self.evaluator.measure(build)
        return replace(ev, genome=build.genome, program=build.program)

    def _remember(self, ev: Evaluation) -> None:
        self.memo[ev.genome] = ev
        if ev.program is not None and not ev.transient and ev.program not in self.by_program:
            self.by_program[ev.program] = ev


def synthetic_time_us(genome: Genome, optimum: Mapping[str, Any] | None = None) -> float:
    """A synthetic fitness landscape for tests and `--fake-evaluator` (µs): 10 at `optimum`
    (default: rank 11, 5 stages, split-K with reduced partials and a 2-iteration late
    finisher; any lone-block depth, as for a graph without wide lone blocks), more the
    further each gene is from it."""
    best = dict(optimum or SYNTHETIC_OPTIMUM)
    cost = 10.0
    for name, want in best.items():
        cost += abs(int(getattr(genome, name)) - int(want)) * (0.7 if name == "candidate" else 1.5)
    return cost


SYNTHETIC_OPTIMUM: dict[str, Any] = {
    "candidate": 11, "stages": 5, "always_split": True, "grid_sum": True, "reduce_partials": True, "late_finisher": 2,
}
