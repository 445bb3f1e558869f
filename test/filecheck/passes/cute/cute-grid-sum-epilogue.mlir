// RUN: mirage-opt %S/../../../data/split_k_gated.mlir -p 'mirage-transpile{decide=false}' | mirage-opt -p cute-register-accumulators,cute-grid-sum-epilogue | filecheck %s
// RUN: mirage-opt %S/../../../data/split_k_gated.mlir -p 'mirage-transpile{decide=false}' | mirage-opt -p cute-register-accumulators,cute-grid-sum-epilogue,cute-grid-sum-epilogue | filecheck %s

// cute-grid-sum-epilogue marks the ops after a cute.grid_sum that the last block of each
// split group runs on the summed values in registers (test/data/split_k_gated.mlir: the two
// sums, silu, mul): both sums and both ops form phase 0; the product is stored (its copy
// reads it) and, as that copy is its one reader, written to global memory by the phase
// itself (the copy is marked and not printed).  Running the pass twice gives the same marks.

// CHECK:      cute.grid_sum(%s3, %s4) -> (%s5, %s6) {cute.epilogue_phases = array<i64: 0, 0>, cute.epilogue_stored = array<i64: 0, 0>
// CHECK:      cute.elementwise "id"(%s5) [#cute.fn<silu>] "store" %s7 {cute.epilogue_phase = 0 : i64, order
// CHECK:      cute.elementwise "mul"(%s7, %s6) [] "store" %s8 {cute.epilogue_phase = 0 : i64, cute.epilogue_stored, order
// CHECK:      cute.copy_s2g "chunked" %s8 -> %o0 {cute.epilogue_global, tile
