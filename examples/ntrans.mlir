// nGPT-style normalised transformer update: rms(X + alpha * (rms(H) + X)), RMSNorm standing in
// for the L2 norm (Mirage benchmark/norm_transformer.py, batch 1: H, X, alpha [8, 4096], fp16).
func.func @ntrans(%H: tensor<8x4096xf16> {kn.strides = array<i64: 4096, 1>},
                  %X: tensor<8x4096xf16> {kn.strides = array<i64: 4096, 1>},
                  %alpha: tensor<8x4096xf16> {kn.strides = array<i64: 4096, 1>}) -> tensor<8x4096xf16> {
  %nh = kn.rms_norm %H {normalized_shape = array<i64: 4096>} : tensor<8x4096xf16>
  %a = kn.add %nh, %X : tensor<8x4096xf16>, tensor<8x4096xf16> -> tensor<8x4096xf16>
  %b = kn.mul %alpha, %a : tensor<8x4096xf16>, tensor<8x4096xf16> -> tensor<8x4096xf16>
  %c = kn.add %X, %b : tensor<8x4096xf16>, tensor<8x4096xf16> -> tensor<8x4096xf16>
  %o = kn.rms_norm %c {normalized_shape = array<i64: 4096>} : tensor<8x4096xf16>
  func.return %o : tensor<8x4096xf16>
}
