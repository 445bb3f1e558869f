// An IRDL constraint failure: xDSL's message spans two lines (used by test_dialects.py).
func.func @bad(%a: tensor<4x8xf16>) {
  %0 = "kn.exp"(%a) : (tensor<4x8xf16>) -> tensor<4x8xf32>
  func.return
}
