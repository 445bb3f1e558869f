// Found by `python -m mirage_xdsl.bench.fuzz --seed 14 --only 337` on an H200 (2026-11-26): rms_norm of fp16 values
// near 1e-6 (X @ W times a squared tiny input): their squares underflowed to 0 in the fp16 tile of the
// decomposed rms_norm, 0 / 0 = NaN.  Fixed by cute-fuse-square-sum (squares taken in fp32 inside the sum).
builtin.module {
  func.func @fuzz_14_337(%X: tensor<3x16x128xf16> {kn.strides = array<i64: 2048, 128, 1>}, %0: tensor<3x128x64xf16> {kn.strides = array<i64: 8192, 64, 1>, kn.weight}, %1: tensor<3x16x1xf16> {kn.strides = array<i64: 16, 1, 1>}) -> (tensor<3x16x64xf16>) {
    %2 = kn.matmul %X, %0 : tensor<3x16x128xf16>, tensor<3x128x64xf16> -> tensor<3x16x64xf16>
    %3 = kn.square %1 : tensor<3x16x1xf16>
    %4 = kn.mul %2, %3 : tensor<3x16x64xf16>, tensor<3x16x1xf16> -> tensor<3x16x64xf16>
    %5 = kn.rms_norm %4 {normalized_shape = array<i64: 64>} : tensor<3x16x64xf16>
    func.return %5 : tensor<3x16x64xf16>
  }
}
