"""The rules of a `mpk.task_graph` (dialects/mpk/ops.py), checked by its verifier.

1. ids: tasks and events are numbered 0, 1, ... in region order; workers lie in
   `[0, workers)`; a task waits on an existing event (or -1) and triggers existing events;
2. counts: an event's `count` equals the number of tasks that trigger it, and is >= 1; its
   `producers` / `consumers`, when listed, are the tasks that trigger / wait on it;
3. cycles: the graph task -> triggered event -> waiting task has no cycle;
4. order: every producer of the event a task waits on precedes it in region order (the
   per-worker queues are walked in region order; seed 003 section 4 linearises likewise);
5. coverage: when task C reads a box of buffer B that another task P writes (boxes
   intersect), P is an ancestor of C through events -- a consumer tile never reads data no
   event covers.

Every failure raises `MpkVerifyError` whose message names the op, the task or tile, the rule
and a fix.  Cost: O(tasks + triggers) for rules 1-4; rule 5 compares the boxes of the tasks
per buffer, ancestors held as Python-int bitsets.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mirage_xdsl.dialects.mpk.ops import TaskGraphOp, TaskOp

Box = tuple[tuple[int, int], ...]


def intersects(a: Box, b: Box) -> bool:
    """Whether two half-open boxes of the same rank share an element."""
    return len(a) == len(b) and all(lo1 < hi2 and lo2 < hi1 for (lo1, hi1), (lo2, hi2) in zip(a, b))


def _fmt_box(b: Box) -> str:
    return "[" + ", ".join(f"{lo}:{hi}" for lo, hi in b) + "]"


def _task(t: TaskOp) -> str:
    lo, hi = t.block_range
    blocks = f"block {lo}" if hi == lo + 1 else f"blocks [{lo}, {hi})"
    return f"task {t.ident} ({t.kernel.data} {blocks})"


def verify_task_graph(graph: TaskGraphOp) -> None:
    """Check rules 1-5 of the module docstring.

    Raises:
        MpkVerifyError: a rule is broken (message: op, task/tile, rule, fix)."""
    from mirage_xdsl.dialects.mpk.ops import MpkVerifyError, ints

    name = graph.name
    tasks, events = graph.tasks, graph.events

    def fail(msg: str) -> MpkVerifyError:
        return MpkVerifyError(f"{name}: {msg}")

    # 1. ids and ranges
    for i, e in enumerate(events):
        if e.ident != i:
            raise fail(f"event at position {i} has id {e.ident}; rule: event ids are 0, 1, ... in order; fix: renumber")
    for i, t in enumerate(tasks):
        if t.ident != i:
            raise fail(f"task at position {i} has id {t.ident}; rule: task ids are 0, 1, ... in order; fix: renumber")
        if not 0 <= t.worker_id < graph.num_workers:
            raise fail(f"{_task(t)} runs on worker {t.worker_id}; rule: workers lie in [0, {graph.num_workers})")
        if not -1 <= t.wait_event < len(events):
            raise fail(f"{_task(t)} waits on event {t.wait_event}, which does not exist; rule: wait is -1 or an event id")
        for ev in t.trigger_events:
            if not 0 <= ev < len(events):
                raise fail(f"{_task(t)} triggers event {ev}, which does not exist; rule: triggers name event ids")
        if len(set(t.trigger_events)) != len(t.trigger_events):
            raise fail(f"{_task(t)} triggers an event twice; rule: each trigger adds 1 to a distinct event")
    buffers = graph.buffer_names
    for t in tasks:
        for write in (False, True):
            for buf, _ in t.footprint(write):
                if not 0 <= buf < len(buffers):
                    raise fail(f"{_task(t)} names buffer {buf}; rule: footprints index the graph's {len(buffers)} buffers")

    # 2. trigger counts
    producers: dict[int, list[int]] = defaultdict(list)
    for t in tasks:
        for ev in t.trigger_events:
            producers[ev].append(t.ident)
    for e in events:
        got = len(producers[e.ident])
        if e.needed != got or e.needed < 1:
            raise fail(
                f"event {e.ident} has count {e.needed} but {got} task(s) trigger it; rule: an event's count equals "
                f"the number of its producers (>= 1), else its consumers wait forever or start early; fix: set count = {got}"
            )

    consumers: dict[int, list[int]] = defaultdict(list)
    for t in tasks:
        if t.wait_event >= 0:
            consumers[t.wait_event].append(t.ident)
    for e in events:
        for role, listed, actual in (("producers", e.producers, producers[e.ident]), ("consumers", e.consumers, consumers[e.ident])):
            if listed is not None and sorted(ints(listed)) != sorted(actual):
                raise fail(
                    f"event {e.ident} lists {role} {list(ints(listed))} but the tasks say {actual}; rule: an event's "
                    f"{role} are the tasks that {'trigger' if role == 'producers' else 'wait on'} it; fix: list {actual}"
                )

    # 3. cycles (Kahn's algorithm over task -> task edges)
    indeg = [len(producers[t.wait_event]) if t.wait_event >= 0 else 0 for t in tasks]
    ready = [t.ident for t in tasks if indeg[t.ident] == 0]
    done = 0
    while ready:
        i = ready.pop()
        done += 1
        for ev in tasks[i].trigger_events:
            for c in consumers[ev]:
                indeg[c] -= 1
                if indeg[c] == 0:
                    ready.append(c)
    if done != len(tasks):
        stuck = next(t for t in tasks if indeg[t.ident] > 0)
        raise fail(
            f"{_task(stuck)} is on a dependency cycle (it waits on event {stuck.wait_event}, which depends on itself); "
            "rule: the task graph is acyclic; fix: remove the back edge"
        )

    # 4. producers precede consumers in region order
    for t in tasks:
        if t.wait_event >= 0:
            late = [p for p in producers[t.wait_event] if p >= t.ident]
            if late:
                raise fail(
                    f"{_task(t)} waits on event {t.wait_event}, triggered by the later task {late[0]}; rule: producers "
                    "precede their consumers in region order (workers walk their queues in that order); fix: reorder"
                )

    # 5. coverage: ancestors as bitsets, in region order
    anc: list[int] = []
    for t in tasks:
        bits = 0
        if t.wait_event >= 0:
            for p in producers[t.wait_event]:
                bits |= anc[p] | (1 << p)
        anc.append(bits)
    writers: dict[int, list[tuple[int, Box]]] = defaultdict(list)
    for t in tasks:
        for buf, b in t.footprint(True):
            writers[buf].append((t.ident, b))
    for t in tasks:
        for buf, rb in t.footprint(False):
            for p, wb in writers.get(buf, ()):
                if p == t.ident or not intersects(rb, wb) or (anc[t.ident] >> p) & 1:
                    continue
                raise fail(
                    f"{_task(t)} reads tile {buffers[buf]}{_fmt_box(rb)}, which {_task(tasks[p])} writes "
                    f"({_fmt_box(wb)}), and no event path leads from that task to it; rule: every tile a consumer "
                    "reads is covered by an event its producer triggers; fix: add the producer to the event the "
                    "consumer waits on"
                )
