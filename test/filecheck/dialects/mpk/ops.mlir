// The mpk dialect round-trips through the custom and the generic syntax.
// RUN: MIRAGE_ROUNDTRIP
// RUN: MIRAGE_GENERIC_ROUNDTRIP

mpk.task_graph attributes {workers = 2 : i64, threads = 128 : i64, smem = 1024 : i64, buffers = ["X", "Y"]} {
  mpk.event {id = 0 : i64, count = 2 : i64, producers = array<i64: 0, 1>, consumers = array<i64: 2>}
  mpk.task {id = 0 : i64, kernel = "k0", blocks = array<i64: 0, 1>, worker = 0 : i64, wait = -1 : i64, triggers = array<i64: 0>, reads = [array<i64: 0, 0, 8, 0, 64>], writes = [array<i64: 1, 0, 8, 0, 64>], cost_ns = 100 : i64}
  mpk.task {id = 1 : i64, kernel = "k0", blocks = array<i64: 1, 2>, worker = 1 : i64, wait = -1 : i64, triggers = array<i64: 0>, reads = [array<i64: 0, 0, 8, 64, 128>], writes = [array<i64: 1, 0, 8, 64, 128>]}
  mpk.task {id = 2 : i64, kernel = "k1", blocks = array<i64: 0, 1>, worker = 0 : i64, wait = 0 : i64, triggers = array<i64>, reads = [array<i64: 1, 0, 8, 0, 128>], writes = []}
}

// CHECK:      mpk.task_graph attributes {workers = 2 : i64, threads = 128 : i64, smem = 1024 : i64, buffers = ["X", "Y"]} {
// CHECK-NEXT:   mpk.event {id = 0 : i64, count = 2 : i64, producers = array<i64: 0, 1>, consumers = array<i64: 2>}
// CHECK-NEXT:   mpk.task {id = 0 : i64, kernel = "k0", blocks = array<i64: 0, 1>, worker = 0 : i64, wait = -1 : i64, triggers = array<i64: 0>, reads = [array<i64: 0, 0, 8, 0, 64>], writes = [array<i64: 1, 0, 8, 0, 64>], cost_ns = 100 : i64}
// CHECK-NEXT:   mpk.task {id = 1 : i64
// CHECK-NEXT:   mpk.task {id = 2 : i64, kernel = "k1", blocks = array<i64: 0, 1>, worker = 0 : i64, wait = 0 : i64, triggers = array<i64>, reads = [array<i64: 1, 0, 8, 0, 128>], writes = []}
// CHECK-NEXT: }

// CHECK-GENERIC: "mpk.task_graph"() <{workers = 2 : i64, threads = 128 : i64, smem = 1024 : i64, buffers = ["X", "Y"]}> ({
// CHECK-GENERIC:   "mpk.event"() <{id = 0 : i64, count = 2 : i64, producers = array<i64: 0, 1>, consumers = array<i64: 2>}> : () -> ()
