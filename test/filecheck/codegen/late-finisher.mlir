// RUN: mirage-opt %S/../../data/split_k_grid_sum.mlir -p 'mirage-transpile{tuning="late_finisher=1"}' | filecheck %s --check-prefix=IR
// RUN: mirage-opt %S/../../data/split_k_grid_sum.mlir -p 'mirage-transpile{tuning="late_finisher=1"}' -t cuda | filecheck %s

// The late finisher (cute-late-finisher, codegen/include/mirage_xdsl/grid.cuh): split-K
// rms_norm(X) @ W over 4 splits of 2 iterations; partners 0-2 run 1 iteration each and the
// finisher (split 3) the other 5, loading its partners' words during its last iteration.
// The partners publish and return; the finisher waits for the words, re-arms them and adds
// its own partials.  No workspace scratch, no arrival counter.  test_codegen.py runs it in
// the host emulator.

// IR:       cute.grid_sum
// IR-SAME:  partner_trips = 1 : i64

// CHECK-LABEL: split_k_rms_k0: grid (2, 4, 1), block (128, 1, 1)
// CHECK:         __launch_bounds__(128, 4) split_k_rms_k0(
// CHECK-NOT:     gs_scratch
// CHECK:         unsigned* __restrict__ gs_counters) {
// CHECK:         const int gs_split = blockIdx.y;
// CHECK-NEXT:    const bool gs_finisher = gs_split == 3;
// CHECK-NEXT:    const int gs_k0 = gs_split * 1;
// CHECK:         i1 + blockIdx.x * 32 + gs_k0 * 2048, tid);
// CHECK:         unsigned* gs_words = gs_counters + (size_t)(blockIdx.x) * 198;
// CHECK:         if (gs_finisher) {
// CHECK:           for (int it = 0; it < 5; ++it) {
// CHECK-NEXT:        if (it == 4) {
// CHECK-NEXT:          gw0.load(gs_words + 0, tid);
// CHECK-NEXT:          gw1.load(gs_words + 64, tid);
// CHECK:             if (it + 1 < 5)
// CHECK:         } else {
// CHECK:           for (int it = 0; it < 1; ++it) {
// CHECK:             if (it + 1 < 1)
// CHECK:         if (!gs_finisher) {
// CHECK-NEXT:      unsigned* gs_mine = gs_words + gs_split * 66;
// CHECK-NEXT:      mx::grid_publish<128,
// CHECK-NEXT:      mx::grid_publish<128,
// CHECK-NEXT:      return;
// CHECK:         gw0.wait(gs_words + 0, tid);
// CHECK:         gw0.rearm(gs_words + 0, tid);
// CHECK:         gw0.finish<
// CHECK-NOT:     grid_arrive
// CHECK-NOT:     grid_discard_partials
// CHECK:       }
