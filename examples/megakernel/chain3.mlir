builtin.module {
  func.func @chain3(%X: tensor<8x256xf16> {kn.strides = array<i64: 256, 1>}, %W: tensor<256x256xf16> {kn.strides = array<i64: 256, 1>, kn.weight}) -> (tensor<8x256xf16>) {
    %0 = kn.matmul %X, %W : tensor<8x256xf16>, tensor<256x256xf16> -> tensor<8x256xf16>
    %1 = kn.silu %0 : tensor<8x256xf16>
    %2 = kn.matmul %1, %W : tensor<8x256xf16>, tensor<256x256xf16> -> tensor<8x256xf16>
    %3 = kn.relu %2 : tensor<8x256xf16>
    func.return %3 : tensor<8x256xf16>
  }
}
