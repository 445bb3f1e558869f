builtin.module {
  func.func @decoder_layer_bs8(%x: tensor<8x4096xf16> {kn.strides = array<i64: 4096, 1>}, %Wq: tensor<4096x4096xf16> {kn.strides = array<i64: 4096, 1>, kn.weight}, %Wk: tensor<4096x1024xf16> {kn.strides = array<i64: 1024, 1>, kn.weight}, %Wv: tensor<4096x1024xf16> {kn.strides = array<i64: 1024, 1>, kn.weight}, %K: tensor<64x128x4096xf16> {kn.strides = array<i64: 524288, 1, 128>}, %V: tensor<64x4096x128xf16> {kn.strides = array<i64: 524288, 128, 1>}, %Wo: tensor<4096x4096xf16> {kn.strides = array<i64: 4096, 1>, kn.weight}, %W1: tensor<4096x12288xf16> {kn.strides = array<i64: 12288, 1>, kn.weight}, %W3: tensor<4096x12288xf16> {kn.strides = array<i64: 12288, 1>, kn.weight}, %W2: tensor<12288x4096xf16> {kn.strides = array<i64: 4096, 1>, kn.weight}) -> (tensor<8x1024xf16>, tensor<8x1024xf16>, tensor<8x4096xf16>) {
    %0 = kn.rms_norm %x {normalized_shape = array<i64: 4096>} : tensor<8x4096xf16>
    %1 = kn.matmul %0, %Wq : tensor<8x4096xf16>, tensor<4096x4096xf16> -> tensor<8x4096xf16>
    %2 = kn.reshape %1 : tensor<8x4096xf16> -> tensor<64x4x128xf16>
    %3 = kn.matmul %0, %Wk : tensor<8x4096xf16>, tensor<4096x1024xf16> -> tensor<8x1024xf16>
    %4 = kn.matmul %0, %Wv : tensor<8x4096xf16>, tensor<4096x1024xf16> -> tensor<8x1024xf16>
    %5 = kn.matmul %2, %K : tensor<64x4x128xf16>, tensor<64x128x4096xf16> -> tensor<64x4x4096xf16>
    %6 = kn.mul_scalar %5 {scalar = 0.088388347648318433 : f64} : tensor<64x4x4096xf16>
    %7 = kn.reduction_max %6 {dim = 2 : i64} : tensor<64x4x4096xf16> -> tensor<64x4x1xf16>
    %8 = kn.sub %6, %7 : tensor<64x4x4096xf16>, tensor<64x4x1xf16> -> tensor<64x4x4096xf16>
    %9 = kn.exp %8 : tensor<64x4x4096xf16>
    %10 = kn.matmul %9, %V : tensor<64x4x4096xf16>, tensor<64x4096x128xf16> -> tensor<64x4x128xf16>
    %11 = kn.reduction %9 {dim = 2 : i64, size = 1 : i64} : tensor<64x4x4096xf16> -> tensor<64x4x1xf16>
    %12 = kn.div %10, %11 : tensor<64x4x128xf16>, tensor<64x4x1xf16> -> tensor<64x4x128xf16>
    %13 = kn.reshape %12 : tensor<64x4x128xf16> -> tensor<8x4096xf16>
    %14 = kn.matmul %13, %Wo : tensor<8x4096xf16>, tensor<4096x4096xf16> -> tensor<8x4096xf16>
    %15 = kn.add %x, %14 : tensor<8x4096xf16>, tensor<8x4096xf16> -> tensor<8x4096xf16>
    %16 = kn.rms_norm %15 {normalized_shape = array<i64: 4096>} : tensor<8x4096xf16>
    %17 = kn.matmul %16, %W1 : tensor<8x4096xf16>, tensor<4096x12288xf16> -> tensor<8x12288xf16>
    %18 = kn.silu %17 : tensor<8x12288xf16>
    %19 = kn.matmul %16, %W3 : tensor<8x4096xf16>, tensor<4096x12288xf16> -> tensor<8x12288xf16>
    %20 = kn.mul %18, %19 : tensor<8x12288xf16>, tensor<8x12288xf16> -> tensor<8x12288xf16>
    %21 = kn.matmul %20, %W2 : tensor<8x12288xf16>, tensor<12288x4096xf16> -> tensor<8x4096xf16>
    %22 = kn.add %15, %21 : tensor<8x4096xf16>, tensor<8x4096xf16> -> tensor<8x4096xf16>
    func.return %3, %4, %22 : tensor<8x1024xf16>, tensor<8x1024xf16>, tensor<8x4096xf16>
  }
}
