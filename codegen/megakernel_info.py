"""`MegakernelInfo`: what the runtime needs to know of a persistent megakernel (no xDSL).

The printer (codegen/megakernel.py) stores it as `LaunchPlan.megakernel` (a dict); the
runtime (runtime/megakernel.py) reads the counter buffer through it: the uint64 state words
(generation, done count, the watchdog's error record; include/mirage_xdsl/megakernel.cuh),
then one uint64 counter per event, then, with tracing, the start and end (%globaltimer, ns)
of every task, then, for an SM-major graph, one uint64 slot counter per SM (`mx::mpk_place`), then, under
scheduler dispatch, the queues (codegen/megakernel_scheduler.py `queue_words`).
"""

from __future__ import annotations

from dataclasses import dataclass

STATE_WORDS = 8
"""uint64 state words before the events (megakernel.cuh, `MpkState`)."""


@dataclass(frozen=True)
class MegakernelInfo:
    """What the runtime needs of a megakernel besides its launch (offsets in uint32 words of
    the plan's counter buffer)."""

    kernel: str
    state_word: int
    """first word of the uint64 state (then the events, then the trace)"""
    events: tuple[int, ...]
    """count of each event"""
    tasks: tuple[str, ...]
    """`<kernel> block <b>` or `<kernel> blocks [lo, hi)` per task"""
    workers: int
    task_worker: tuple[int, ...]
    trace: bool = False
    sm_slots: int = 0
    """SMs of an SM-major graph (worker w on SM w % sm_slots; mpk.sm_major), else 0"""
    scheduler: bool = False
    """scheduler dispatch: one more CTA than `workers` (the scheduler) and the queues"""

    @property
    def ctas(self) -> int:
        """CTAs of the launch: the workers, and the scheduler under scheduler dispatch."""
        return self.workers + int(self.scheduler)

    @property
    def event_word(self) -> int:
        """Index of the first event counter (uint32 words into the counter buffer)."""
        return self.state_word + 2 * STATE_WORDS

    @property
    def trace_word(self) -> int:
        """Index of the first trace timestamp word (uint32 words into the counter buffer)."""
        return self.event_word + 2 * len(self.events)

    @property
    def slot_word(self) -> int:
        """Index of the first per-SM uint64 slot counter (uint32 words into the counter buffer)."""
        return self.trace_word + (4 * len(self.tasks) if self.trace else 0)

    @property
    def queue_word(self) -> int:
        """Index of the first queue word under scheduler dispatch (the workers' uint64 heads,
        then a slot per task, then the scheduler's push count per worker)."""
        return self.slot_word + 2 * self.sm_slots

    @property
    def words(self) -> int:
        """uint32 words of the megakernel's region of the counter buffer."""
        queues = 3 * self.workers + len(self.tasks) if self.scheduler else 0
        return self.queue_word - self.state_word + queues + (queues & 1)

    @staticmethod
    def from_dict(raw: dict) -> MegakernelInfo:
        """The info of a launch plan's `megakernel` dict (the inverse of `asdict`)."""
        return MegakernelInfo(
            raw["kernel"], raw["state_word"], tuple(raw["events"]), tuple(raw["tasks"]), raw["workers"],
            tuple(raw["task_worker"]), raw.get("trace", False), raw.get("sm_slots", 0), raw.get("scheduler", False),
        )
