// A kernel graph that parses but does not verify (used by ../cli-errors.mlir and test_dialects.py).
func.func @bad(%a: tensor<4x8xf16>, %b: tensor<4x8xf16>) -> tensor<4x4xf16> {
  %c = kn.matmul %a, %b : tensor<4x8xf16>, tensor<4x8xf16> -> tensor<4x4xf16>
  func.return %c : tensor<4x4xf16>
}
