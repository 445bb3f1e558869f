// convert-contraction-to-hopper: the seed's Task-4 bmm (cmk,ckn->cmn, c = 4, m = n = k = 4096)
// becomes one cute.hopper_gemm whose attributes hold the whole schedule: 128 x 256 x 64 tiles,
// 3 stages beside the TMA-store staging tiles, a persistent grid of 132 blocks and the grouped
// (L2) block order of 16 m-tiles; options override tile-n, stages, group-m and the epilogue.
// RUN: mirage-opt %s -p convert-contraction-to-hopper | filecheck %s
// RUN: mirage-opt %s -p 'convert-contraction-to-hopper{group-m=1 tile-n=128 epilogue=store16}' | filecheck %s --check-prefix=OPT
// RUN: mirage-opt %s -p convert-contraction-to-hopper -t cuda | filecheck %s --check-prefix=CUDA
// RUN: not mirage-opt %s -p 'convert-contraction-to-hopper{stages=9}' 2>&1 | filecheck %s --check-prefix=ERR
// RUN: mirage-opt %s -p 'convert-contraction-to-hopper{tile-m=256}' -t cuda | filecheck %s --check-prefix=TALL
// RUN: not mirage-opt %s -p 'convert-contraction-to-hopper{tile-m=256 tile-n=256}' 2>&1 | filecheck %s --check-prefix=TALLERR

func.func @bmm(%a: tensor<4x4096x4096xf16>, %b: tensor<4x4096x4096xf16>) -> tensor<4x4096x4096xf16> {
  %c = "contraction.contract"(%a, %b) <{dim_types = ["C", "M", "N", "K"], dim_sizes = array<i64: 4, 4096, 4096, 4096>, strides = [array<i64: 16777216, 4096, 0, 1>, array<i64: 16777216, 0, 1, 4096>, array<i64: 16777216, 4096, 1, 0>], data_type = "FLOAT16", prim_main = "GEMM", prim_last = "NONE", prim_first = "ZERO"}> : (tensor<4x4096x4096xf16>, tensor<4x4096x4096xf16>) -> tensor<4x4096x4096xf16>
  func.return %c : tensor<4x4096x4096xf16>
}
// CHECK: func.func @bmm{{.*}}kn.workspace_size = 0
// CHECK: cute.hopper_gemm(%{{.*}}, %{{.*}}) {kernel_name = "bmm_hopper_gemm_0", gemm = array<i64: 4096, 4096, 4096, 4, 1>
// CHECK-SAME: a_strides = array<i64: 4096, 16777216, 0>, b_strides = array<i64: 4096, 1, 16777216, 0>
// CHECK-SAME: tile = array<i64: 128, 256, 64>, stages = 3 : i64, consumers = 2 : i64, group_m = 16 : i64, grid = 132 : i64
// CHECK-SAME: trans_b = true, epilogue = "tma_store", cluster = 1 : i64
// CHECK-NOT: contraction.contract

// OPT: tile = array<i64: 128, 128, 64>, stages = 6 : i64, consumers = 2 : i64, group_m = 1 : i64
// OPT-SAME: epilogue = "store16"

// CUDA: #include "mirage_xdsl/hopper_gemm.cuh"
// CUDA: extern "C" __global__ void __launch_bounds__(384, 1)
// CUDA-NEXT: bmm_hopper_gemm_0(const __grid_constant__ CUtensorMap a, const __grid_constant__ CUtensorMap b, const __grid_constant__ CUtensorMap cm, half* __restrict__ c) {
// CUDA-NEXT: mx::hopper::gemm_ws<half, 256, 3, 2, 1, 2, 1>(&a, &b, &cm, c, mx::hopper::GemmShape{4096, 4096, 4096, 4, 4, 4096LL, 16777216LL, 0LL, 16});

// ERR: convert-contraction-to-hopper: contraction.contract: stages=9 must be in 2..3 for a 128x256x64 tile

// tile-m=256: two m64 slabs per consumer (the header's CSLABS = 2, last template argument)
// TALL: mx::hopper::gemm_ws<half, 128, 3, 2, 1, 2, 1, 0, mx::hopper::NoActivation, 1, 0, 0, 2>(&a, &b, &cm, c,
// TALLERR: tile-m=256 needs tile-n <= 128

// cluster=2 share-a=1: CTA pairs of neighbouring n-blocks share the A tile (SHARE_A, last template
// argument); pingpong=1 cluster=2: ping-pong consumers in CTA pairs sharing B.
// RUN: mirage-opt %s -p 'convert-contraction-to-hopper{tile-m=256 cluster=2 share-a=1}' | filecheck %s --check-prefix=PAIRA
// RUN: mirage-opt %s -p 'convert-contraction-to-hopper{tile-m=256 cluster=2 share-a=1}' -t cuda | filecheck %s --check-prefix=PAIRACUDA
// RUN: mirage-opt %s -p 'convert-contraction-to-hopper{pingpong=1 cluster=2}' -t cuda | filecheck %s --check-prefix=PPPAIR
// PAIRA: tile = array<i64: 256, 128, 64>{{.*}}cluster = 2 : i64{{.*}}share_a = true
// PAIRACUDA: extern "C" __global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(384, 1)
// PAIRACUDA: mx::hopper::gemm_ws<half, 128, 3, 2, 1, 2, 2, 0, mx::hopper::NoActivation, 1, 0, 0, 2, 1>(&a, &b, &cm, c,
// PPPAIR: extern "C" __global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(384, 1)
// PPPAIR: mx::hopper::gemm_ws<half, 128, 6, 2, 1, 1, 2, 0, mx::hopper::NoActivation, 1, 1>(&a, &b, nullptr, c,

// ELWISE_MUL: the factor is the GEMM's third operand and the kernel's `d` pointer (MUL = 1).
// RUN: mirage-opt %s -p convert-contraction-to-hopper | filecheck %s --check-prefix=MUL
// RUN: mirage-opt %s -p convert-contraction-to-hopper -t cuda | filecheck %s --check-prefix=MULCUDA
func.func @gemm_mul(%a: tensor<256x128xf16>, %b: tensor<128x512xf16>, %d: tensor<256x512xf16>) -> tensor<256x512xf16> {
  %c = "contraction.contract"(%a, %b, %d) <{dim_types = ["M", "N", "K"], dim_sizes = array<i64: 256, 512, 128>, strides = [array<i64: 128, 0, 1>, array<i64: 0, 1, 512>, array<i64: 512, 1, 0>], data_type = "FLOAT16", prim_main = "GEMM", prim_last = "ELWISE_MUL", prim_first = "ZERO"}> : (tensor<256x128xf16>, tensor<128x512xf16>, tensor<256x512xf16>) -> tensor<256x512xf16>
  func.return %c : tensor<256x512xf16>
}
// MUL: cute.hopper_gemm(%a, %b, %d) {kernel_name = "gemm_mul_hopper_gemm_1"
// MUL-SAME: epilogue = "tma_store", cluster = 1 : i64, mul_tma = true}
// one tile per block: the factor comes by TMA (MUL = 2, D's map `dm` after C's) into the staging tiles
// MULCUDA: gemm_mul_hopper_gemm_1({{.*}}CUtensorMap cm, const __grid_constant__ CUtensorMap dm, half* __restrict__ c, const half* __restrict__ d) {
// MULCUDA-NEXT: mx::hopper::gemm_ws<half, {{[0-9]+}}, {{[0-9]+}}, {{[12]}}, 1, 2, 1, 2>(&a, &b, &cm, c, mx::hopper::GemmShape{256, 512, 128, 1, 1, 512LL, 0LL, 0LL, {{[0-9]+}}}, d, nullptr, nullptr, &dm);
