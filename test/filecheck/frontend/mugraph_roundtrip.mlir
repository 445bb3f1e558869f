// JSON -> IR -> era-C JSON -> IR gives the same IR as the direct import.
// RUN: mirage-opt %mugraphs/lora.json -t mugraph | mirage-opt -f mugraph | filecheck %s
// RUN: mirage-opt %mugraphs/lora.json -t mugraph | filecheck %s --check-prefix=JSON
// RUN: mirage-opt %mugraphs/lora.json -t 'mugraph{era=A}' | filecheck %s --check-prefix=ERA-A
// RUN: mirage-opt %mugraphs/lora.json -t mugraph | mirage-opt -f mugraph --mugraph-era=B | filecheck %s --check-prefix=ERA-B

// CHECK-LABEL: func.func @graph_0(
// CHECK-SAME:    tensor<16x256xf16> {kn.strides = array<i64: 256, 1>}
// CHECK:         tb.input {{%[0-9]+}} {input_map = array<i64: 1, -1, -1>, forloop_dim = -1 : i64} : tensor<256x4096xf16> -> !tb.stensor<256x64xf16>
// CHECK:         tb.forloop_accum nored
// CHECK:       func.func @graph_3(

// Era-C spelling: fp16 = 940, fresh guids from 10000000 / 20000000, dims padded to 4.
// JSON:      "data_type": 940,
// JSON-NEXT: "dim": [
// JSON-NEXT:   16,
// JSON-NEXT:   256,
// JSON-NEXT:   0,
// JSON-NEXT:   0
// JSON-NEXT: ],
// JSON-NEXT: "guid": 10000000,
// JSON-NEXT: "layout": "DmemRowMajor",
// JSON:      "guid": 20000000,
// JSON:      "op_type": "tb_forloop_accum_nored_op",
// JSON-NOT:  921

// ERA-A: "data_type": 921,
// ERA-A: "op_type": "tb_accum_nored_op",

// Era B reads code 940 as bf16.
// ERA-B: func.func @graph_0({{%[0-9]+}}: tensor<16x256xbf16>
