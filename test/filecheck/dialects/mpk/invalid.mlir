// Every mpk.task_graph rule: one broken graph per chunk; the message names the op, the
// task or tile, the rule and a fix.
// RUN: mirage-opt %s --split-input-file --verify-diagnostics --parsing-diagnostics | filecheck %s
// RUN: mirage-opt %s --split-input-file --verify-diagnostics --parsing-diagnostics | filecheck %s --check-prefix=VALID
// VALID-NOT: builtin.module {

// wrong trigger count: two producers, count 1 (its consumer would start early)
mpk.task_graph attributes {workers = 2 : i64, threads = 128 : i64, smem = 0 : i64, buffers = ["X", "Y"]} {
  mpk.event {id = 0 : i64, count = 1 : i64}
  mpk.task {id = 0 : i64, kernel = "k0", blocks = array<i64: 0, 1>, worker = 0 : i64, wait = -1 : i64, triggers = array<i64: 0>, reads = [], writes = [array<i64: 1, 0, 8, 0, 64>]}
  mpk.task {id = 1 : i64, kernel = "k0", blocks = array<i64: 1, 2>, worker = 1 : i64, wait = -1 : i64, triggers = array<i64: 0>, reads = [], writes = [array<i64: 1, 0, 8, 64, 128>]}
  mpk.task {id = 2 : i64, kernel = "k1", blocks = array<i64: 0, 1>, worker = 0 : i64, wait = 0 : i64, triggers = array<i64>, reads = [array<i64: 1, 0, 8, 0, 128>], writes = []}
}
// CHECK: mpk.task_graph: event 0 has count 1 but 2 task(s) trigger it; rule: an event's count equals the number of its producers (>= 1), else its consumers wait forever or start early; fix: set count = 2

// -----

// a cycle: task 1 waits on event 0, which only task 1 triggers
mpk.task_graph attributes {workers = 1 : i64, threads = 128 : i64, smem = 0 : i64, buffers = ["X"]} {
  mpk.event {id = 0 : i64, count = 1 : i64}
  mpk.task {id = 0 : i64, kernel = "k0", blocks = array<i64: 0, 1>, worker = 0 : i64, wait = -1 : i64, triggers = array<i64>, reads = [], writes = []}
  mpk.task {id = 1 : i64, kernel = "k1", blocks = array<i64: 0, 1>, worker = 0 : i64, wait = 0 : i64, triggers = array<i64: 0>, reads = [], writes = []}
}
// CHECK: mpk.task_graph: task 1 (k1 block 0) is on a dependency cycle (it waits on event 0, which depends on itself); rule: the task graph is acyclic; fix: remove the back edge

// -----

// a missing edge: task 2 reads Y[0:8, 0:128] but only the producer of the first half triggers its event
mpk.task_graph attributes {workers = 2 : i64, threads = 128 : i64, smem = 0 : i64, buffers = ["X", "Y"]} {
  mpk.event {id = 0 : i64, count = 1 : i64}
  mpk.task {id = 0 : i64, kernel = "k0", blocks = array<i64: 0, 1>, worker = 0 : i64, wait = -1 : i64, triggers = array<i64: 0>, reads = [array<i64: 0, 0, 8, 0, 64>], writes = [array<i64: 1, 0, 8, 0, 64>]}
  mpk.task {id = 1 : i64, kernel = "k0", blocks = array<i64: 1, 2>, worker = 1 : i64, wait = -1 : i64, triggers = array<i64>, reads = [array<i64: 0, 0, 8, 64, 128>], writes = [array<i64: 1, 0, 8, 64, 128>]}
  mpk.task {id = 2 : i64, kernel = "k1", blocks = array<i64: 0, 1>, worker = 0 : i64, wait = 0 : i64, triggers = array<i64>, reads = [array<i64: 1, 0, 8, 0, 128>], writes = []}
}
// CHECK: mpk.task_graph: task 2 (k1 block 0) reads tile Y[0:8, 0:128], which task 1 (k0 block 1) writes ([0:8, 64:128]), and no event path leads from that task to it; rule: every tile a consumer reads is covered by an event its producer triggers; fix: add the producer to the event the consumer waits on

// -----

// a producer after its consumer in region order (the workers' queues would deadlock)
mpk.task_graph attributes {workers = 2 : i64, threads = 128 : i64, smem = 0 : i64, buffers = ["X"]} {
  mpk.event {id = 0 : i64, count = 1 : i64}
  mpk.task {id = 0 : i64, kernel = "k1", blocks = array<i64: 0, 1>, worker = 0 : i64, wait = 0 : i64, triggers = array<i64>, reads = [], writes = []}
  mpk.task {id = 1 : i64, kernel = "k0", blocks = array<i64: 0, 1>, worker = 1 : i64, wait = -1 : i64, triggers = array<i64: 0>, reads = [], writes = []}
}
// CHECK: mpk.task_graph: task 0 (k1 block 0) waits on event 0, triggered by the later task 1; rule: producers precede their consumers in region order (workers walk their queues in that order); fix: reorder

// -----

// a worker out of range
mpk.task_graph attributes {workers = 2 : i64, threads = 128 : i64, smem = 0 : i64, buffers = ["X"]} {
  mpk.task {id = 0 : i64, kernel = "k0", blocks = array<i64: 0, 1>, worker = 2 : i64, wait = -1 : i64, triggers = array<i64>, reads = [], writes = []}
}
// CHECK: mpk.task_graph: task 0 (k0 block 0) runs on worker 2; rule: workers lie in [0, 2)

// -----

// an event that does not exist
mpk.task_graph attributes {workers = 1 : i64, threads = 128 : i64, smem = 0 : i64, buffers = ["X"]} {
  mpk.task {id = 0 : i64, kernel = "k0", blocks = array<i64: 0, 1>, worker = 0 : i64, wait = 3 : i64, triggers = array<i64>, reads = [], writes = []}
}
// CHECK: mpk.task_graph: task 0 (k0 block 0) waits on event 3, which does not exist; rule: wait is -1 or an event id

// -----

// an empty block range
mpk.task_graph attributes {workers = 1 : i64, threads = 128 : i64, smem = 0 : i64, buffers = ["X"]} {
  mpk.task {id = 0 : i64, kernel = "k0", blocks = array<i64: 1, 1>, worker = 0 : i64, wait = -1 : i64, triggers = array<i64>, reads = [], writes = []}
}
// CHECK: mpk.task 0: blocks must be [first, end) with 0 <= first < end, got [1, 1]

// -----

// an event whose listed consumers disagree with the tasks (task 2 waits on it)
mpk.task_graph attributes {workers = 1 : i64, threads = 128 : i64, smem = 0 : i64, buffers = ["X"]} {
  mpk.event {id = 0 : i64, count = 1 : i64, producers = array<i64: 0>, consumers = array<i64: 1>}
  mpk.task {id = 0 : i64, kernel = "k0", blocks = array<i64: 0, 1>, worker = 0 : i64, wait = -1 : i64, triggers = array<i64: 0>, reads = [], writes = []}
  mpk.task {id = 1 : i64, kernel = "k1", blocks = array<i64: 0, 1>, worker = 0 : i64, wait = -1 : i64, triggers = array<i64>, reads = [], writes = []}
  mpk.task {id = 2 : i64, kernel = "k1", blocks = array<i64: 1, 2>, worker = 0 : i64, wait = 0 : i64, triggers = array<i64>, reads = [], writes = []}
}
// CHECK: mpk.task_graph: event 0 lists consumers [1] but the tasks say [2]; rule: an event's consumers are the tasks that wait on it; fix: list [2]

// -----

// an unknown dispatch mode
mpk.task_graph attributes {mpk.dispatch = "fast", workers = 1 : i64, threads = 128 : i64, smem = 0 : i64, buffers = ["X"]} {
  mpk.task {id = 0 : i64, kernel = "k0", blocks = array<i64: 0, 1>, worker = 0 : i64, wait = -1 : i64, triggers = array<i64>, reads = [], writes = []}
}
// CHECK: mpk.task_graph: mpk.dispatch is "fast"; rule: it is a string, one of table, straight, inline, scheduler; fix: set kn-to-task-graph's `dispatch` option instead of writing the attribute
