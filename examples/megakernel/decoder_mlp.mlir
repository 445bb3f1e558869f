builtin.module {
  func.func @decoder_mlp(%x: tensor<1x4096xf16> {kn.strides = array<i64: 4096, 1>}, %W1: tensor<4096x12288xf16> {kn.strides = array<i64: 12288, 1>, kn.weight}, %W3: tensor<4096x12288xf16> {kn.strides = array<i64: 12288, 1>, kn.weight}, %W2: tensor<12288x4096xf16> {kn.strides = array<i64: 4096, 1>, kn.weight}) -> (tensor<1x4096xf16>) {
    %0 = kn.rms_norm %x {normalized_shape = array<i64: 4096>} : tensor<1x4096xf16>
    %1 = kn.matmul %0, %W1 : tensor<1x4096xf16>, tensor<4096x12288xf16> -> tensor<1x12288xf16>
    %2 = kn.silu %1 : tensor<1x12288xf16>
    %3 = kn.matmul %0, %W3 : tensor<1x4096xf16>, tensor<4096x12288xf16> -> tensor<1x12288xf16>
    %4 = kn.mul %2, %3 : tensor<1x12288xf16>, tensor<1x12288xf16> -> tensor<1x12288xf16>
    %5 = kn.matmul %4, %W2 : tensor<1x12288xf16>, tensor<12288x4096xf16> -> tensor<1x4096xf16>
    %6 = kn.add %x, %5 : tensor<1x4096xf16>, tensor<1x4096xf16> -> tensor<1x4096xf16>
    func.return %6 : tensor<1x4096xf16>
  }
}
