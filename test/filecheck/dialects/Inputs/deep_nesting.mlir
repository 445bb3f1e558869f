// 40 nested arrays: deeper than target/device.py MAX_NESTING_DEPTH (32)
func.func @deep() attributes {x = [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]} {
  func.return
}
