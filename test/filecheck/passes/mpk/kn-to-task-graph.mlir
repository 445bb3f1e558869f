// RUN: mirage-opt %s -p 'kn-fuse{per-op=true block-threads=128},mirage-transpile{fuse=false},kn-to-task-graph{workers=4}' | filecheck %s

// relu -> exp -> matmul, one kernel per op: relu and exp run 2 blocks of 128 columns each,
// the matmul 8 x 4 split-K blocks of 8 columns x 64 rows of K.  Tile-level dependencies:
// exp's block i waits only for relu's block i (event 0 / 1, count 1), and a split-K block
// waits only for the exp block that wrote the 64 columns of b it reads (events 2 and 3).
// The workspace is re-planned without reuse (kn.workspace_size grows to 20480 B).
func.func @tiles(%X: tensor<8x256xf16> {kn.strides = array<i64: 256, 1>},
                 %W: tensor<256x64xf16> {kn.strides = array<i64: 64, 1>, kn.weight}) -> tensor<8x64xf16> {
  %a = kn.relu %X : tensor<8x256xf16>
  %b = kn.exp %a : tensor<8x256xf16>
  %c = kn.matmul %b, %W : tensor<8x256xf16>, tensor<256x64xf16> -> tensor<8x64xf16>
  func.return %c : tensor<8x64xf16>
}

// CHECK-LABEL: func.func @tiles
// CHECK-SAME:    kn.workspace_size = [[WS:[0-9]+]] : i64, mpk.megakernel = "tiles_mpk"
// CHECK:       mpk.task_graph attributes {mpk.est_makespan_ns = {{[0-9]+}} : i64, mpk.watchdog_ns = 500000000 : i64, mpk.dispatch = "inline", workers = 4 : i64, threads = 128 : i64, smem = {{[0-9]+}} : i64, buffers = ["X", "W", "a", "b", "c"]} {
// CHECK-NEXT:    mpk.event {id = 0 : i64, count = 1 : i64, producers = array<i64: 0>, consumers = array<i64: 2>}
// CHECK-NEXT:    mpk.event {id = 1 : i64, count = 1 : i64, producers = array<i64: 1>, consumers = array<i64: 3>}
// CHECK-NEXT:    mpk.event {id = 2 : i64, count = 1 : i64, producers = array<i64: 2>, consumers = array<i64: 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19>}
// CHECK-NEXT:    mpk.event {id = 3 : i64, count = 1 : i64, producers = array<i64: 3>, consumers = array<i64: 20, 21, {{.*}}, 35>}
// CHECK-NEXT:    mpk.task {id = 0 : i64, kernel = "tiles_k0", blocks = array<i64: 0, 1>, worker = 0 : i64, wait = -1 : i64, triggers = array<i64: 0>, reads = [array<i64: 0, 0, 8, 0, 128>], writes = [array<i64: 2, 0, 8, 0, 128>], cost_ns = {{[0-9]+}} : i64}
// CHECK-NEXT:    mpk.task {id = 1 : i64, kernel = "tiles_k0", blocks = array<i64: 1, 2>, worker = 1 : i64, wait = -1 : i64, triggers = array<i64: 1>, reads = [array<i64: 0, 0, 8, 128, 256>], writes = [array<i64: 2, 0, 8, 128, 256>]
// CHECK-NEXT:    mpk.task {id = 2 : i64, kernel = "tiles_k1", blocks = array<i64: 0, 1>, worker = 0 : i64, wait = 0 : i64, triggers = array<i64: 2>, reads = [array<i64: 2, 0, 8, 0, 128>], writes = [array<i64: 3, 0, 8, 0, 128>]
// CHECK-NEXT:    mpk.task {id = 3 : i64, kernel = "tiles_k1", blocks = array<i64: 1, 2>, worker = 1 : i64, wait = 1 : i64, triggers = array<i64: 3>
// the first split-K block reads b[0:8, 0:64] and W[0:64, 0:8]; it waits on exp's block 0
// CHECK-NEXT:    mpk.task {id = 4 : i64, kernel = "tiles_k2", blocks = array<i64: 0, 1>, worker = {{[0-3]}} : i64, wait = 2 : i64, triggers = array<i64>, reads = [array<i64: 3, 0, 8, 0, 64>, array<i64: 1, 0, 64, 0, 8>], writes = [array<i64: 4, 0, 8, 0, 8>]
// CHECK:         mpk.task {id = 35 : i64, kernel = "tiles_k2", blocks = array<i64: 31, 32>, worker = {{[0-3]}} : i64, wait = 3 : i64
// CHECK-NEXT:  }
