// suite_bmm_nt_f16: Batched matmul with a transposed operand, `A @ B^T`: A [batch, m, k] row-major, B stored as [batch, n, k] (row-major), read as the [batch, k, n] operand through its strides (n*k, 1, k) -- kn.matmul has no transpose flag, a transposed operand is a layout.
// float16, batch=8, m=1024, n=1024, k=1024; written by python -m mirage_xdsl.bench.suite.write
builtin.module {
  func.func @suite_bmm_nt_f16(%A: tensor<8x1024x1024xf16> {kn.strides = array<i64: 1048576, 1024, 1>}, %B: tensor<8x1024x1024xf16> {kn.strides = array<i64: 1048576, 1, 1024>, kn.weight}) -> (tensor<8x1024x1024xf16>) {
    %0 = kn.matmul %A, %B : tensor<8x1024x1024xf16>, tensor<8x1024x1024xf16> -> tensor<8x1024x1024xf16>
    func.return %0 : tensor<8x1024x1024xf16>
  }
}
