builtin.module {
  func.func @chain40(%X: tensor<8x32xf16> {kn.strides = array<i64: 32, 1>}, %W0: tensor<32x32xf16> {kn.strides = array<i64: 32, 1>, kn.weight}, %W1: tensor<32x32xf16> {kn.strides = array<i64: 32, 1>, kn.weight}, %W2: tensor<32x32xf16> {kn.strides = array<i64: 32, 1>, kn.weight}, %W3: tensor<32x32xf16> {kn.strides = array<i64: 32, 1>, kn.weight}, %W4: tensor<32x32xf16> {kn.strides = array<i64: 32, 1>, kn.weight}, %W5: tensor<32x32xf16> {kn.strides = array<i64: 32, 1>, kn.weight}, %W6: tensor<32x32xf16> {kn.strides = array<i64: 32, 1>, kn.weight}, %W7: tensor<32x32xf16> {kn.strides = array<i64: 32, 1>, kn.weight}, %W8: tensor<32x32xf16> {kn.strides = array<i64: 32, 1>, kn.weight}, %W9: tensor<32x32xf16> {kn.strides = array<i64: 32, 1>, kn.weight}, %W10: tensor<32x32xf16> {kn.strides = array<i64: 32, 1>, kn.weight}, %W11: tensor<32x32xf16> {kn.strides = array<i64: 32, 1>, kn.weight}, %W12: tensor<32x32xf16> {kn.strides = array<i64: 32, 1>, kn.weight}, %W13: tensor<32x32xf16> {kn.strides = array<i64: 32, 1>, kn.weight}, %W14: tensor<32x32xf16> {kn.strides = array<i64: 32, 1>, kn.weight}, %W15: tensor<32x32xf16> {kn.strides = array<i64: 32, 1>, kn.weight}, %W16: tensor<32x32xf16> {kn.strides = array<i64: 32, 1>, kn.weight}, %W17: tensor<32x32xf16> {kn.strides = array<i64: 32, 1>, kn.weight}, %W18: tensor<32x32xf16> {kn.strides = array<i64: 32, 1>, kn.weight}, %W19: tensor<32x32xf16> {kn.strides = array<i64: 32, 1>, kn.weight}) -> (tensor<8x32xf16>) {
    %0 = kn.matmul %X, %W0 : tensor<8x32xf16>, tensor<32x32xf16> -> tensor<8x32xf16>
    %1 = kn.relu %0 : tensor<8x32xf16>
    %2 = kn.matmul %1, %W1 : tensor<8x32xf16>, tensor<32x32xf16> -> tensor<8x32xf16>
    %3 = kn.relu %2 : tensor<8x32xf16>
    %4 = kn.matmul %3, %W2 : tensor<8x32xf16>, tensor<32x32xf16> -> tensor<8x32xf16>
    %5 = kn.relu %4 : tensor<8x32xf16>
    %6 = kn.matmul %5, %W3 : tensor<8x32xf16>, tensor<32x32xf16> -> tensor<8x32xf16>
    %7 = kn.relu %6 : tensor<8x32xf16>
    %8 = kn.matmul %7, %W4 : tensor<8x32xf16>, tensor<32x32xf16> -> tensor<8x32xf16>
    %9 = kn.relu %8 : tensor<8x32xf16>
    %10 = kn.matmul %9, %W5 : tensor<8x32xf16>, tensor<32x32xf16> -> tensor<8x32xf16>
    %11 = kn.relu %10 : tensor<8x32xf16>
    %12 = kn.matmul %11, %W6 : tensor<8x32xf16>, tensor<32x32xf16> -> tensor<8x32xf16>
    %13 = kn.relu %12 : tensor<8x32xf16>
    %14 = kn.matmul %13, %W7 : tensor<8x32xf16>, tensor<32x32xf16> -> tensor<8x32xf16>
    %15 = kn.relu %14 : tensor<8x32xf16>
    %16 = kn.matmul %15, %W8 : tensor<8x32xf16>, tensor<32x32xf16> -> tensor<8x32xf16>
    %17 = kn.relu %16 : tensor<8x32xf16>
    %18 = kn.matmul %17, %W9 : tensor<8x32xf16>, tensor<32x32xf16> -> tensor<8x32xf16>
    %19 = kn.relu %18 : tensor<8x32xf16>
    %20 = kn.matmul %19, %W10 : tensor<8x32xf16>, tensor<32x32xf16> -> tensor<8x32xf16>
    %21 = kn.relu %20 : tensor<8x32xf16>
    %22 = kn.matmul %21, %W11 : tensor<8x32xf16>, tensor<32x32xf16> -> tensor<8x32xf16>
    %23 = kn.relu %22 : tensor<8x32xf16>
    %24 = kn.matmul %23, %W12 : tensor<8x32xf16>, tensor<32x32xf16> -> tensor<8x32xf16>
    %25 = kn.relu %24 : tensor<8x32xf16>
    %26 = kn.matmul %25, %W13 : tensor<8x32xf16>, tensor<32x32xf16> -> tensor<8x32xf16>
    %27 = kn.relu %26 : tensor<8x32xf16>
    %28 = kn.matmul %27, %W14 : tensor<8x32xf16>, tensor<32x32xf16> -> tensor<8x32xf16>
    %29 = kn.relu %28 : tensor<8x32xf16>
    %30 = kn.matmul %29, %W15 : tensor<8x32xf16>, tensor<32x32xf16> -> tensor<8x32xf16>
    %31 = kn.relu %30 : tensor<8x32xf16>
    %32 = kn.matmul %31, %W16 : tensor<8x32xf16>, tensor<32x32xf16> -> tensor<8x32xf16>
    %33 = kn.relu %32 : tensor<8x32xf16>
    %34 = kn.matmul %33, %W17 : tensor<8x32xf16>, tensor<32x32xf16> -> tensor<8x32xf16>
    %35 = kn.relu %34 : tensor<8x32xf16>
    %36 = kn.matmul %35, %W18 : tensor<8x32xf16>, tensor<32x32xf16> -> tensor<8x32xf16>
    %37 = kn.relu %36 : tensor<8x32xf16>
    %38 = kn.matmul %37, %W19 : tensor<8x32xf16>, tensor<32x32xf16> -> tensor<8x32xf16>
    %39 = kn.relu %38 : tensor<8x32xf16>
    func.return %39 : tensor<8x32xf16>
  }
}
