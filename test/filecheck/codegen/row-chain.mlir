// RUN: mirage-opt %s -p mirage-transpile -t cuda | filecheck %s

// A normalisation chain over one row per block (nTrans's shape, smaller): the elementwise
// passes and the two whole-block row sums run in registers (codegen/register_rows.py), the
// inputs come straight from global memory and the output goes straight out, in 16-byte
// vectors (each thread owns 8 consecutive elements), with no shared-memory tile between.
// test_register_rows.py checks the same printing on examples/ntrans.mlir in the host emulator.
func.func @rows(%H: tensor<4x4096xf16> {kn.strides = array<i64: 4096, 1>},
                %X: tensor<4x4096xf16> {kn.strides = array<i64: 4096, 1>}) -> tensor<4x4096xf16> {
  %nh = kn.rms_norm %H {normalized_shape = array<i64: 4096>} : tensor<4x4096xf16>
  %a = kn.add %nh, %X : tensor<4x4096xf16>, tensor<4x4096xf16> -> tensor<4x4096xf16>
  %o = kn.rms_norm %a {normalized_shape = array<i64: 4096>} : tensor<4x4096xf16>
  func.return %o : tensor<4x4096xf16>
}

// CHECK-LABEL: rows_k0: grid (4, 1, 1), block (512, 1, 1)
// CHECK-NOT:     g2s_
// CHECK:         {  // in registers:
// CHECK:           float x0[8];  // s{{[0-9]+}}, from global memory
// CHECK-NEXT:      mx::load_row<8>(x0, &(i0 + blockIdx.x * 4096)
// CHECK:           mx::block_sum<512>(
// CHECK:           mx::block_sum<512>(
// CHECK:           mx::store_row<8>(&(o0 + blockIdx.x * 4096)
// CHECK:         __syncthreads();
// CHECK-NOT:     s2g_
// CHECK:       }
