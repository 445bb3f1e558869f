"""Ops of the `mpk` dialect: one persistent kernel's tasks and events.

A `mpk.task_graph` (in a kernel graph `func.func`, beside the `cute.kernel` ops whose bodies
its tasks run) holds, in execution order, `mpk.event` and `mpk.task` ops:

    mpk.task_graph attributes {workers = 132 : i64, threads = 128 : i64, smem = 4224 : i64,
                               buffers = ["X", "W", "chain_k0.out0"]} {
      mpk.event {id = 0 : i64, count = 2 : i64, producers = array<i64: 0, 1>, consumers = array<i64: 2>}
      mpk.task {id = 0 : i64, kernel = "chain_k0", blocks = array<i64: 0, 1>, worker = 0 : i64,
                wait = -1 : i64, triggers = array<i64: 0>, cost_ns = 900 : i64,
                reads = [array<i64: 0, 0, 8, 0, 64>], writes = [array<i64: 2, 0, 8, 0, 8>]}
    }

* a task runs threadblocks `[blocks[0], blocks[1])` (linear ids, x fastest) of the
  `cute.kernel` named `kernel` on worker CTA `worker`; before it starts it waits until event
  `wait` (-1: none) has reached its count, after it ends it adds 1 to every event of
  `triggers` (seed 003, section 5: one dependent event per task, trigger lists fan out);
* an event's `count` is the number of tasks that trigger it (its producers); the tasks that
  wait on it are its consumers (both optionally restated on the event, and then checked);
* `reads` / `writes` are the task's global-memory footprints, one box per access: `array<i64:
  buffer, lo0, hi0, lo1, hi1, ...>` (element coordinates of the DTensor, half-open per dim,
  outermost dim first); `buffer` indexes the graph's `buffers` names;
* the region order is the linearised execution order: each worker walks its tasks in that
  order, so a producer always precedes its consumers (which, with all workers resident,
  rules out deadlock: the first unfinished task in region order can always run).

Rules (checked by `verify.verify_task_graph`, messages name the op, the task/tile and the
rule): ids dense in order, workers in range, no cycle, producers before consumers, event
counts equal their producer counts, and every box a task reads that another task writes is
written by an ancestor of the reader (an event path covers the tile).
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import ArrayAttr, DenseArrayBase, IntegerAttr, StringAttr, i64
from xdsl.ir import Dialect, Region
from xdsl.irdl import (
    IRDLOperation,
    ParsePropInAttrDict,
    irdl_op_definition,
    lazy_traits_def,
    opt_prop_def,
    prop_def,
    region_def,
    traits_def,
)
from xdsl.traits import HasParent, NoTerminator
from xdsl.utils.exceptions import VerifyException

__all__ = ["DISPATCH_ATTR", "DISPATCH_MODES", "Mpk", "EventOp", "MpkVerifyError", "SM_MAJOR_ATTR", "TaskGraphOp", "TaskOp", "box", "ints"]

SM_MAJOR_ATTR = "mpk.sm_major"
"""i64 on a task graph: the SM count S when its worker w is assigned as running on SM w % S
(passes/mpk/assign.py); the megakernel then numbers its CTAs so (codegen/megakernel.py)."""

DISPATCH_ATTR = "mpk.dispatch"
"""string on a task graph: how a worker finds its tasks (kn-to-task-graph chooses,
codegen/megakernel.py prints): `table` -- a loop over its queue in constant tables, one
`switch` on the task's kernel; `straight` -- its tasks in queue order as straight-line calls
with every index, event and block a literal; `inline` -- `straight` with the task bodies
inlined at each call; `scheduler` -- a scheduler CTA beside the workers pushes each task into
its worker's queue once its event is reached (codegen/megakernel_scheduler.py).  Absent: `table`."""
DISPATCH_MODES = ("table", "straight", "inline", "scheduler")


class MpkVerifyError(VerifyException):
    """A task graph breaks a rule; the message names the op, the task or tile, and the rule."""


def ints(attr: DenseArrayBase) -> tuple[int, ...]:
    """The integers of a `array<i64: ...>`."""
    return tuple(int(v) for v in attr.get_values())  # type: ignore[arg-type, misc]


def _dense(values: Sequence[int]) -> DenseArrayBase:
    return DenseArrayBase.from_list(i64, list(values))


def box(buffer: int, lo: Sequence[int], hi: Sequence[int]) -> DenseArrayBase:
    """The footprint entry `array<i64: buffer, lo0, hi0, ...>` of a half-open box."""
    flat = [buffer]
    for a, b in zip(lo, hi):
        flat += [a, b]
    return _dense(flat)


@irdl_op_definition
class EventOp(IRDLOperation):
    """An event counter: reached when `count` producer tasks have triggered it.  The optional
    `producers` / `consumers` (task ids) restate, for the reader, which tasks trigger it and
    which wait on it; when present the verifier checks them against the tasks."""

    name = "mpk.event"
    id = prop_def(IntegerAttr)
    count = prop_def(IntegerAttr)
    producers = opt_prop_def(DenseArrayBase)
    consumers = opt_prop_def(DenseArrayBase)
    traits = lazy_traits_def(lambda: (HasParent(TaskGraphOp),))
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "attr-dict"

    def __init__(self, ident: int, count: int, producers: Sequence[int] | None = None, consumers: Sequence[int] | None = None):
        props: dict = {"id": IntegerAttr(ident, i64), "count": IntegerAttr(count, i64)}
        if producers is not None:
            props["producers"] = _dense(producers)
        if consumers is not None:
            props["consumers"] = _dense(consumers)
        super().__init__(properties=props)

    @property
    def ident(self) -> int:
        """The event's id."""
        return self.id.value.data

    @property
    def needed(self) -> int:
        """Number of triggers from producer tasks after which the event is reached (`count`)."""
        return self.count.value.data


@irdl_op_definition
class TaskOp(IRDLOperation):
    """Threadblocks `[blocks[0], blocks[1])` of kernel `kernel` on worker `worker` (module
    docstring); `cost_ns` is the cost model's estimate (ns) the worker assignment used."""

    name = "mpk.task"
    id = prop_def(IntegerAttr)
    kernel = prop_def(StringAttr)
    blocks = prop_def(DenseArrayBase)
    worker = prop_def(IntegerAttr)
    wait = prop_def(IntegerAttr)
    triggers = prop_def(DenseArrayBase)
    reads = prop_def(ArrayAttr)
    writes = prop_def(ArrayAttr)
    cost_ns = opt_prop_def(IntegerAttr)
    traits = lazy_traits_def(lambda: (HasParent(TaskGraphOp),))
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "attr-dict"

    def __init__(
        self,
        ident: int,
        kernel: str,
        blocks: tuple[int, int],
        worker: int,
        wait: int,
        triggers: Sequence[int],
        reads: Sequence[DenseArrayBase] = (),
        writes: Sequence[DenseArrayBase] = (),
        cost_ns: int | None = None,
    ):
        props: dict = {
            "id": IntegerAttr(ident, i64),
            "kernel": StringAttr(kernel),
            "blocks": _dense(blocks),
            "worker": IntegerAttr(worker, i64),
            "wait": IntegerAttr(wait, i64),
            "triggers": _dense(triggers),
            "reads": ArrayAttr(list(reads)),
            "writes": ArrayAttr(list(writes)),
        }
        if cost_ns is not None:
            props["cost_ns"] = IntegerAttr(cost_ns, i64)
        super().__init__(properties=props)

    @property
    def ident(self) -> int:
        """The task's id."""
        return self.id.value.data

    @property
    def block_range(self) -> tuple[int, int]:
        """The task's threadblocks [first, end) of its kernel's grid (linear block indices)."""
        lo, hi = ints(self.blocks)
        return lo, hi

    @property
    def worker_id(self) -> int:
        """The worker CTA that runs the task."""
        return self.worker.value.data

    @property
    def wait_event(self) -> int:
        """The id of the event the task waits on before it starts (-1: none)."""
        return self.wait.value.data

    @property
    def trigger_events(self) -> tuple[int, ...]:
        """The ids of the events the task triggers when it ends."""
        return ints(self.triggers)

    def footprint(self, write: bool) -> list[tuple[int, tuple[tuple[int, int], ...]]]:
        """(buffer, ((lo, hi) per dim)) of every read (`write` False) or write box."""
        out = []
        for entry in (self.writes if write else self.reads).data:
            if not isinstance(entry, DenseArrayBase):
                raise MpkVerifyError(f"{self.name} {self.ident}: footprint entries must be array<i64>")
            v = ints(entry)
            if len(v) < 1 or len(v) % 2 != 1:
                raise MpkVerifyError(
                    f"{self.name} {self.ident}: footprint entry {list(v)} must be [buffer, lo0, hi0, lo1, hi1, ...]"
                )
            out.append((v[0], tuple((v[i], v[i + 1]) for i in range(1, len(v), 2))))
        return out

    def verify_(self) -> None:
        """Check the block range, the worker and the footprint entries.

        Raises:
            MpkVerifyError: `blocks` is not [first, end) with 0 <= first < end, a negative worker,
                or a read/write entry that is not an array<i64> [buffer, lo0, hi0, lo1, hi1, ...].
        """
        lo_hi = ints(self.blocks)
        if len(lo_hi) != 2 or not 0 <= lo_hi[0] < lo_hi[1]:
            raise MpkVerifyError(f"{self.name} {self.ident}: blocks must be [first, end) with 0 <= first < end, got {list(lo_hi)}")
        if self.worker_id < 0:
            raise MpkVerifyError(f"{self.name} {self.ident}: worker must be >= 0")
        self.footprint(False)
        self.footprint(True)


@irdl_op_definition
class TaskGraphOp(IRDLOperation):
    """The task graph of one persistent kernel (module docstring): `workers` worker CTAs of
    `threads` threads and `smem` bytes of dynamic shared memory each; `buffers` names the
    DTensors footprints refer to."""

    name = "mpk.task_graph"
    workers = prop_def(IntegerAttr)
    threads = prop_def(IntegerAttr)
    smem = prop_def(IntegerAttr)
    buffers = prop_def(ArrayAttr)
    body = region_def("single_block")
    traits = traits_def(NoTerminator())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "attr-dict-with-keyword $body"

    def __init__(self, workers: int, threads: int, smem: int, buffers: Sequence[str], body: Region):
        super().__init__(
            regions=[body],
            properties={
                "workers": IntegerAttr(workers, i64),
                "threads": IntegerAttr(threads, i64),
                "smem": IntegerAttr(smem, i64),
                "buffers": ArrayAttr([StringAttr(b) for b in buffers]),
            },
        )

    @property
    def tasks(self) -> list[TaskOp]:
        """The graph's `mpk.task` ops, in order."""
        return [op for op in self.body.block.ops if isinstance(op, TaskOp)]

    @property
    def events(self) -> list[EventOp]:
        """The graph's `mpk.event` ops, in order."""
        return [op for op in self.body.block.ops if isinstance(op, EventOp)]

    @property
    def num_workers(self) -> int:
        """Number of worker CTAs of the persistent kernel."""
        return self.workers.value.data

    @property
    def sm_major(self) -> int:
        """`SM_MAJOR_ATTR` (the SM count S, worker w on SM w % S), or 0 when absent."""
        attr = self.attributes.get(SM_MAJOR_ATTR)
        return attr.value.data if isinstance(attr, IntegerAttr) else 0

    @property
    def dispatch(self) -> str:
        """`DISPATCH_ATTR` (one of `DISPATCH_MODES`), `table` when absent."""
        attr = self.attributes.get(DISPATCH_ATTR)
        return attr.data if isinstance(attr, StringAttr) else "table"

    @property
    def num_threads(self) -> int:
        """Threads per worker CTA."""
        return self.threads.value.data

    @property
    def smem_bytes(self) -> int:
        """Dynamic shared memory per worker CTA, in bytes."""
        return self.smem.value.data

    @property
    def buffer_names(self) -> list[str]:
        """The names of the DTensors that footprint buffer indices refer to."""
        return [b.data for b in self.buffers.data]  # type: ignore[attr-defined]

    def verify_(self) -> None:
        """Check the graph rules of dialects/mpk/verify.py (`verify_task_graph`).

        Raises:
            MpkVerifyError: a rule is broken (op, task or tile, rule and fix in the message).
        """
        from mirage_xdsl.dialects.mpk.verify import verify_task_graph

        attr = self.attributes.get(DISPATCH_ATTR)
        if attr is not None and not (isinstance(attr, StringAttr) and attr.data in DISPATCH_MODES):
            raise MpkVerifyError(
                f"{self.name}: {DISPATCH_ATTR} is {attr}; rule: it is a string, one of {', '.join(DISPATCH_MODES)}; "
                "fix: set kn-to-task-graph's `dispatch` option instead of writing the attribute"
            )
        verify_task_graph(self)


Mpk = Dialect("mpk", [TaskGraphOp, TaskOp, EventOp], [])
