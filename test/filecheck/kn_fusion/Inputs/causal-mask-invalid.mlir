// Broken causal masks for causal-mask.mlir (BAD): one per chunk.
func.func @rank1(%a: tensor<8xf16>) {
  %0 = kn.causal_mask %a {offset = 0 : i64} : tensor<8xf16>
  func.return
}
// BAD: kn.causal_mask: needs a tensor of rank >= 2 ([..., q, k]), got shape (8,)

// -----

func.func @negative(%a: tensor<4x8xf16>) {
  %0 = kn.causal_mask %a {offset = -1 : i64} : tensor<4x8xf16>
  func.return
}
// BAD: kn.causal_mask: offset -1 < 0 would mask every key of row 0 (an empty softmax row); use offset = k - q with q <= k
