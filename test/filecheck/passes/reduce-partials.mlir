// RUN: mirage-opt %S/../../data/split_k_grid_sum.mlir -p 'tb-decompose-accumulators{reduce_partials=false},tb-fusion-chains,tb-resolve-layout,tb-compute-strides,tb-schedule' | filecheck %s --check-prefix=SUMFIRST
// RUN: mirage-opt %S/../../data/split_k_grid_sum.mlir -p 'tb-decompose-accumulators{reduce_partials=true},tb-fusion-chains,tb-resolve-layout,tb-compute-strides,tb-schedule' | filecheck %s --check-prefix=REDUCEFIRST

// Split-K rms_norm(X) @ W: where the sum of squares is reduced relative to its grid sum.
// With reduce_partials (the default) each split block reduces its partial to [2, 1] first,
// and tb-schedule puts both grid sums on the level after that reduction; without, the grid
// sum reads the nored accumulator [2, 32] and the reduction runs on the summed tile.

// SUMFIRST:      %ss = tb.forloop_accum nored %sq
// SUMFIRST:      %{{.*}} = tb.grid_sum %ss {{{.*}}tb.level = 1 : i64
// SUMFIRST-SAME:   !tb.stensor<2x32xf16, after_accum>
// SUMFIRST:      tb.reduction {{.*}}tb.level = 2 : i64

// REDUCEFIRST:      %ss = tb.forloop_accum nored %sq
// REDUCEFIRST-NEXT: %[[R:.*]] = tb.reduction %ss {{{.*}}tb.stage = "post", tb.level = 1 : i64
// REDUCEFIRST-NEXT: %gacc = tb.grid_sum %acc {{{.*}}tb.stage = "post", tb.level = 2 : i64
// REDUCEFIRST-NEXT: %gss = tb.grid_sum %[[R]] {{{.*}}tb.stage = "post", tb.level = 2 : i64
// REDUCEFIRST-SAME:   !tb.stensor<2x1xf16, after_accum>
// REDUCEFIRST-NEXT: tb.mul_scalar %gss {{{.*}}tb.level = 3 : i64
