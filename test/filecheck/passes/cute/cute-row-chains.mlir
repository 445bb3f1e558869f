// RUN: mirage-opt %s -p 'mirage-transpile{decide=false}' | mirage-opt -p cute-block-reduce,cute-slice-mma,cute-register-accumulators,cute-row-chains | mirage-opt | filecheck %s
// RUN: mirage-opt %s -p 'mirage-transpile{decide=false}' | mirage-opt -p cute-row-chains | filecheck %s --check-prefix=NOBLOCK

// cute-row-chains marks register-resident row chains: here a whole row softmax (row max of
// the loaded row, exp, row sum, div into the one-trip output accumulator) is one chain
// (`cute.row_chain = 0` on each of its ops); the input copy, the output accumulator's fill
// and its copy out are replaced by global loads / stores (`cute.row_chain_global`).
// The chain leaves every tile of the plan untouched: the launch asks only for the header
// (`cute.row_chain_smem`), the block sums' scratch moves down to it (`cute.kslice_scratch`).
// Without cute-block-reduce the reductions are not whole-block ones: no chain.
// `cute.row_chain_run = 8` on the chain's first op: each of the 256 threads holds 8
// consecutive elements of the 2048-element row, one 16-byte fp16 vector.  The fp32 softmax
// below holds 8 elements of its 8192-element row per thread (1024 threads): two 16-byte
// vectors, interleaved across the block (run 4: vector c of thread tid at (c x 1024 + tid) x 4).
// `cute.row_chain_vectors` on each replaced copy says whether the chain moves that global
// tensor as 16-byte vectors (true for both softmaxes: unit stride along the row, 8 fp16 / 4
// fp32 elements per vector).  The softmax of a column-major X (row stride 16 elements, not 1)
// loads X element by element (`false`) and still stores its row-major output as vectors.
// The pass's output is parsed and printed again (`| mirage-opt`) before it is checked.

// CHECK:      cute.kernel(%X) attributes {{{.*}}cute.kslice_scratch = array<i64: 128, 0>{{.*}}cute.row_chains = 1 : i64, cute.row_chain_smem = 128 : i64
// CHECK:      cute.copy_g2s "chunked" %i0 -> %s0 {cute.row_chain_global, cute.row_chain_vectors = true,
// CHECK:      cute.fill %s4, 0.0 {cute.row_chain_global}
// CHECK:      cute.reduce "max" %s0 [] "store" %s1 {cute.reduce_threads = 256 : i64, cute.row_chain_run = 8 : i64, cute.row_chain = 0 : i64
// CHECK:      cute.elementwise "sub"(%s0, %s1) [#cute.fn<exp>] "store" %s2 {cute.row_chain = 0 : i64, order
// CHECK:      cute.reduce "sum" %s2 [] "store" %s3 {cute.reduce_threads = 256 : i64, cute.row_chain = 0 : i64
// CHECK:      cute.elementwise "div"(%s2, %s3) [] "add" %s4 {cute.row_chain = 0 : i64, cute.row_chain_stored
// CHECK:      cute.copy_s2g "chunked" %s4 -> %o0 {cute.row_chain_global, cute.row_chain_vectors = true,

// CHECK:      cute.kernel(%X) {{.*}}kernel_name = "softmax_f32_k0"
// CHECK:      cute.copy_g2s "chunked" %i0 -> %s0 {cute.row_chain_global, cute.row_chain_vectors = true,
// CHECK:      cute.reduce "max" %s0 [] "store" %s1 {cute.reduce_threads = 1024 : i64, cute.row_chain_run = 4 : i64, cute.row_chain = 0 : i64
// CHECK:      cute.copy_s2g "chunked" %s4 -> %o0 {cute.row_chain_global, cute.row_chain_vectors = true,

// CHECK:      cute.kernel(%X) {{.*}}kernel_name = "softmax_strided_k0"
// CHECK:      cute.copy_g2s "sync" %i0 -> %s0 {cute.row_chain_global, cute.row_chain_vectors = false, tile = #cute.layout<(1,2048):(1,16)>
// CHECK:      cute.reduce "max" %s0 [] "store" %s1 {cute.reduce_threads = 256 : i64, cute.row_chain_run = 8 : i64, cute.row_chain = 0 : i64
// CHECK:      cute.copy_s2g "chunked" %s4 -> %o0 {cute.row_chain_global, cute.row_chain_vectors = true, tile = #cute.layout<(1,2048):(2048,1)>

// NOBLOCK:     cute.row_chains = 0 : i64
// NOBLOCK-NOT: cute.row_chain =
// NOBLOCK-NOT: cute.row_chain_vectors

func.func @softmax(%X: tensor<16x2048xf16> {kn.strides = array<i64: 2048, 1>}) -> tensor<16x2048xf16> {
  %m = kn.reduction_max %X {dim = 1 : i64} : tensor<16x2048xf16> -> tensor<16x1xf16>
  %d = kn.sub %X, %m : tensor<16x2048xf16>, tensor<16x1xf16> -> tensor<16x2048xf16>
  %e = kn.exp %d : tensor<16x2048xf16>
  %s = kn.reduction %e {dim = 1 : i64, size = 1 : i64} : tensor<16x2048xf16> -> tensor<16x1xf16>
  %y = kn.div %e, %s : tensor<16x2048xf16>, tensor<16x1xf16> -> tensor<16x2048xf16>
  func.return %y : tensor<16x2048xf16>
}

func.func @softmax_f32(%X: tensor<16x8192xf32> {kn.strides = array<i64: 8192, 1>}) -> tensor<16x8192xf32> {
  %m = kn.reduction_max %X {dim = 1 : i64} : tensor<16x8192xf32> -> tensor<16x1xf32>
  %d = kn.sub %X, %m : tensor<16x8192xf32>, tensor<16x1xf32> -> tensor<16x8192xf32>
  %e = kn.exp %d : tensor<16x8192xf32>
  %s = kn.reduction %e {dim = 1 : i64, size = 1 : i64} : tensor<16x8192xf32> -> tensor<16x1xf32>
  %y = kn.div %e, %s : tensor<16x8192xf32>, tensor<16x1xf32> -> tensor<16x8192xf32>
  func.return %y : tensor<16x8192xf32>
}

func.func @softmax_strided(%X: tensor<16x2048xf16> {kn.strides = array<i64: 1, 16>}) -> tensor<16x2048xf16> {
  %m = kn.reduction_max %X {dim = 1 : i64} : tensor<16x2048xf16> -> tensor<16x1xf16>
  %d = kn.sub %X, %m : tensor<16x2048xf16>, tensor<16x1xf16> -> tensor<16x2048xf16>
  %e = kn.exp %d : tensor<16x2048xf16>
  %s = kn.reduction %e {dim = 1 : i64, size = 1 : i64} : tensor<16x2048xf16> -> tensor<16x1xf16>
  %y = kn.div %e, %s : tensor<16x2048xf16>, tensor<16x1xf16> -> tensor<16x2048xf16>
  func.return %y : tensor<16x2048xf16>
}
