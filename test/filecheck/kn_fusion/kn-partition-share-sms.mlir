// kn-partition{share-sms}: the Q, K and V projections of a decoder layer read one normalized
// row and run side by side in a megakernel, so each is planned for its share of the SMs by
// weight bytes (8, 2 and 2 MB: 88, 22 and 22 of 132).  Without the option the small
// projections get GPU-filling grids of 128 short tiles; with it, 64 longer ones.
// RUN: mirage-opt %s -p 'kn-partition{block-threads=128 smem-limit=56320}' | filecheck %s --check-prefix=ALONE
// RUN: mirage-opt %s -p 'kn-partition{block-threads=128 smem-limit=56320 share-sms=true}' | filecheck %s --check-prefix=SHARED

func.func @qkv(%x: tensor<1x1024xf16> {kn.strides = array<i64: 1024, 1>},
               %Wq: tensor<1024x4096xf16> {kn.strides = array<i64: 4096, 1>, kn.weight},
               %Wk: tensor<1024x1024xf16> {kn.strides = array<i64: 1024, 1>, kn.weight},
               %Wv: tensor<1024x1024xf16> {kn.strides = array<i64: 1024, 1>, kn.weight})
               -> (tensor<1x4096xf16>, tensor<1x1024xf16>, tensor<1x1024xf16>) {
  %n = kn.rms_norm %x {normalized_shape = array<i64: 1024>} : tensor<1x1024xf16>
  %q = kn.matmul %n, %Wq : tensor<1x1024xf16>, tensor<1024x4096xf16> -> tensor<1x4096xf16>
  %k = kn.matmul %n, %Wk : tensor<1x1024xf16>, tensor<1024x1024xf16> -> tensor<1x1024xf16>
  %v = kn.matmul %n, %Wv : tensor<1x1024xf16>, tensor<1024x1024xf16> -> tensor<1x1024xf16>
  func.return %q, %k, %v : tensor<1x4096xf16>, tensor<1x1024xf16>, tensor<1x1024xf16>
}
// ALONE-LABEL:  func.func @qkv
// ALONE:          kn.customized(%{{.*}}, %Wq) {{.*}}grid_dim = array<i64: 256, 1, 1>
// ALONE:          kn.customized(%{{.*}}, %Wk) {{.*}}grid_dim = array<i64: 128, 1, 1>
// ALONE:          kn.customized(%{{.*}}, %Wv) {{.*}}grid_dim = array<i64: 128, 1, 1>
// SHARED-LABEL: func.func @qkv
// SHARED:         kn.customized(%{{.*}}, %Wq) {{.*}}grid_dim = array<i64: 256, 1, 1>
// SHARED:         kn.customized(%{{.*}}, %Wk) {{.*}}grid_dim = array<i64: 64, 1, 1>
// SHARED:         kn.customized(%{{.*}}, %Wv) {{.*}}grid_dim = array<i64: 64, 1, 1>
