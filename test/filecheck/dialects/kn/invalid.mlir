// Every `kn` verifier rule: one broken op per chunk, FileCheck matches the message
// (`<op name>: <rule>`) that --verify-diagnostics prints.  The VALID run makes sure that
// no chunk verifies (a verified chunk would be printed as `builtin.module {`).
// RUN: mirage-opt %s --split-input-file --verify-diagnostics --parsing-diagnostics | filecheck %s
// RUN: mirage-opt %s --split-input-file --verify-diagnostics --parsing-diagnostics | filecheck %s --check-prefix=VALID
// VALID-NOT: builtin.module {

// ---- device tensor types ----

func.func @dynamic_dim(%a: tensor<?x8xf16>) {
  %0 = kn.exp %a : tensor<?x8xf16>
  func.return
}
// CHECK: kn.exp: operand #0 has type tensor<?x8xf16>; device tensors need a static shape of 1 to 4 positive dims

// -----

func.func @rank5(%a: tensor<1x2x3x4x5xf16>) {
  %0 = kn.relu %a : tensor<1x2x3x4x5xf16>
  func.return
}
// CHECK: kn.relu: operand #0 has type tensor<1x2x3x4x5xf16>; device tensors need a static shape of 1 to 4 positive dims

// -----

func.func @rank0(%a: tensor<f16>) {
  %0 = kn.relu %a : tensor<f16>
  func.return
}
// CHECK: kn.relu: operand #0 has type tensor<f16>; device tensors need a static shape

// -----

func.func @index_dtype(%a: tensor<4xindex>) {
  %0 = kn.sqrt %a : tensor<4xindex>
  func.return
}
// CHECK: kn.sqrt: operand #0: element type index is not a float or integer type

// -----

func.func @unary_type_changes(%a: tensor<4x8xf16>) {
  %0 = "kn.exp"(%a) : (tensor<4x8xf16>) -> tensor<4x8xf32>
  func.return
}
// CHECK: kn.exp: the result type tensor<4x8xf32> must equal the operand's type tensor<4x8xf16>{{$}}

// -----

// kn's unary ops never round (only tb's do, for the 16-bit rms statistics tb-decompose-accumulators builds)
func.func @unary_rounds(%a: tensor<4x8xf32>) {
  %0 = kn.exp %a : tensor<4x8xf32> -> tensor<4x8xf16>
  func.return
}
// CHECK: kn.exp: the result type tensor<4x8xf16> must equal the operand's type tensor<4x8xf32>{{$}}

// ---- unary ops with parameters ----

// -----

func.func @clamp_bounds(%a: tensor<4x8xf16>) {
  %0 = kn.clamp %a {min_value = 2.0 : f64, max_value = 1.0 : f64} : tensor<4x8xf16>
  func.return
}
// CHECK: kn.clamp: min_value (2.0) must not exceed max_value (1.0)

// -----

func.func @mul_scalar_needs_scalar(%a: tensor<4x8xf16>) {
  %0 = kn.mul_scalar %a : tensor<4x8xf16>
  func.return
}
// CHECK: property 'scalar' expected in operation 'kn.mul_scalar'

// ---- binary ops ----

// -----

func.func @broadcast(%a: tensor<4x8xf16>, %b: tensor<4x2xf16>) {
  %0 = kn.add %a, %b : tensor<4x8xf16>, tensor<4x2xf16> -> tensor<4x8xf16>
  func.return
}
// CHECK: kn.add: dim 1 cannot broadcast: 8 vs 2

// -----

func.func @broadcast_rank(%a: tensor<4x8xf16>, %b: tensor<8xf16>) {
  %0 = kn.mul %a, %b : tensor<4x8xf16>, tensor<8xf16> -> tensor<4x8xf16>
  func.return
}
// CHECK: kn.mul: operand ranks differ (2 vs 1); Mirage broadcasts equal ranks only

// -----

func.func @binary_result_shape(%a: tensor<4x8xf16>, %b: tensor<4x1xf16>) {
  %0 = kn.sub %a, %b : tensor<4x8xf16>, tensor<4x1xf16> -> tensor<4x1xf16>
  func.return
}
// CHECK: kn.sub: result shape (4, 1) does not match the inferred shape (4, 8)

// -----

// Two 16-bit types never mix (f16 with f32 may: dialects/common/precision.py).
func.func @binary_dtype(%a: tensor<4x8xf16>, %b: tensor<4x8xbf16>) {
  %0 = kn.div %a, %b : tensor<4x8xf16>, tensor<4x8xbf16> -> tensor<4x8xf16>
  func.return
}
// CHECK: kn.div: operands and results must share one element type, got ['bf16', 'f16']

// -----

func.func @pow_static(%a: tensor<4x?xf16>, %b: tensor<4x8xf16>) {
  %0 = kn.pow %a, %b : tensor<4x?xf16>, tensor<4x8xf16> -> tensor<4x8xf16>
  func.return
}
// CHECK: kn.pow: operand #0 has type tensor<4x?xf16>; device tensors need a static shape

// ---- matmul ----

// -----

func.func @contraction(%a: tensor<4x8xf16>, %b: tensor<4x8xf16>) {
  %0 = kn.matmul %a, %b : tensor<4x8xf16>, tensor<4x8xf16> -> tensor<4x8xf16>
  func.return
}
// CHECK: kn.matmul: contraction dims differ: lhs[-1] = 8 vs rhs[-2] = 4

// -----

func.func @batch_dims(%a: tensor<2x4x8xf16>, %b: tensor<3x8x16xf16>) {
  %0 = kn.matmul %a, %b : tensor<2x4x8xf16>, tensor<3x8x16xf16> -> tensor<2x4x16xf16>
  func.return
}
// CHECK: kn.matmul: batch dims differ: (2,) vs (3,)

// -----

func.func @matmul_ranks(%a: tensor<2x4x8xf16>, %b: tensor<8x16xf16>) {
  %0 = kn.matmul %a, %b : tensor<2x4x8xf16>, tensor<8x16xf16> -> tensor<2x4x16xf16>
  func.return
}
// CHECK: kn.matmul: operand ranks differ (3 vs 2)

// -----

func.func @matmul_rank1(%a: tensor<8xf16>, %b: tensor<8xf16>) {
  %0 = kn.matmul %a, %b : tensor<8xf16>, tensor<8xf16> -> tensor<8xf16>
  func.return
}
// CHECK: kn.matmul: matmul operands need rank >= 2

// -----

func.func @matmul_result(%a: tensor<4x8xf16>, %b: tensor<8x16xf16>) {
  %0 = kn.matmul %a, %b : tensor<4x8xf16>, tensor<8x16xf16> -> tensor<4x8xf16>
  func.return
}
// CHECK: kn.matmul: result shape (4, 8) does not match the inferred shape (4, 16)

// -----

func.func @matmul_dtype(%a: tensor<4x8xf16>, %b: tensor<8x16xbf16>) {
  %0 = kn.matmul %a, %b : tensor<4x8xf16>, tensor<8x16xbf16> -> tensor<4x16xf16>
  func.return
}
// CHECK: kn.matmul: operands and results must share one element type, got ['bf16', 'f16']

// ---- reduction ----

// -----

func.func @reduction_dim(%a: tensor<4x8xf16>) {
  %0 = kn.reduction %a {dim = 2 : i64, size = 1 : i64} : tensor<4x8xf16> -> tensor<4x8xf16>
  func.return
}
// CHECK: kn.reduction: reduction dim 2 is not a dimension of a rank-2 tensor

// -----

func.func @reduction_size(%a: tensor<4x96xf16>) {
  %0 = kn.reduction %a {dim = 1 : i64, size = 64 : i64} : tensor<4x96xf16> -> tensor<4x64xf16>
  func.return
}
// CHECK: kn.reduction: dim 1 (size 96) is not divisible by the reduced size 64

// -----

func.func @reduction_zero_size(%a: tensor<4x96xf16>) {
  %0 = kn.reduction %a {dim = 1 : i64, size = 0 : i64} : tensor<4x96xf16> -> tensor<4x1xf16>
  func.return
}
// CHECK: kn.reduction: dim 1 (size 96) is not divisible by the reduced size 0

// -----

func.func @reduction_result(%a: tensor<4x8xf16>) {
  %0 = kn.reduction %a {dim = 0 : i64, size = 1 : i64} : tensor<4x8xf16> -> tensor<4x1xf16>
  func.return
}
// CHECK: kn.reduction: result shape (4, 1) does not match the inferred shape (1, 8)

// -----

// A sum of a 16-bit tensor may be f32 (kn-widen-sums), not another 16-bit type; a max keeps its type.
func.func @reduction_dtype(%a: tensor<4x8xf16>) {
  %0 = kn.reduction %a {dim = 1 : i64, size = 1 : i64} : tensor<4x8xf16> -> tensor<4x1xbf16>
  func.return
}
// CHECK: kn.reduction: operands and results must share one element type, got ['bf16', 'f16']

// -----

func.func @reduction_max_dtype(%a: tensor<4x8xf16>) {
  %0 = kn.reduction_max %a {dim = 1 : i64} : tensor<4x8xf16> -> tensor<4x1xf32>
  func.return
}
// CHECK: kn.reduction_max: operands and results must share one element type, got ['f16', 'f32']

// ---- rms_norm ----

// -----

func.func @rms_norm_not_trailing(%a: tensor<4x8xf16>) {
  %0 = kn.rms_norm %a {normalized_shape = array<i64: 4>} : tensor<4x8xf16>
  func.return
}
// CHECK: kn.rms_norm: normalized_shape (4,) must equal the trailing dims of (4, 8)

// -----

func.func @rms_norm_empty(%a: tensor<4x8xf16>) {
  %0 = kn.rms_norm %a {normalized_shape = array<i64>} : tensor<4x8xf16>
  func.return
}
// CHECK: kn.rms_norm: normalized_shape () must equal the trailing dims of (4, 8)

// -----

func.func @rms_norm_too_long(%a: tensor<4x8xf16>) {
  %0 = kn.rms_norm %a {normalized_shape = array<i64: 2, 4, 8>} : tensor<4x8xf16>
  func.return
}
// CHECK: kn.rms_norm: normalized_shape (2, 4, 8) must equal the trailing dims of (4, 8)

// ---- concat / chunk ----

// -----

func.func @concat_other_dim(%a: tensor<4x8xf16>, %b: tensor<2x8xf16>) {
  %0 = kn.concat %a, %b {dim = 1 : i64} : tensor<4x8xf16>, tensor<2x8xf16> -> tensor<4x16xf16>
  func.return
}
// CHECK: kn.concat: dim 0 differs (4 vs 2); only the concat dim may differ

// -----

func.func @concat_dim(%a: tensor<4x8xf16>, %b: tensor<4x8xf16>) {
  %0 = kn.concat %a, %b {dim = -1 : i64} : tensor<4x8xf16>, tensor<4x8xf16> -> tensor<4x16xf16>
  func.return
}
// CHECK: kn.concat: concat dim -1 is not a dimension of a rank-2 tensor

// -----

func.func @concat_result(%a: tensor<4x8xf16>, %b: tensor<4x8xf16>) {
  %0 = kn.concat %a, %b {dim = 0 : i64} : tensor<4x8xf16>, tensor<4x8xf16> -> tensor<4x16xf16>
  func.return
}
// CHECK: kn.concat: result shape (4, 16) does not match the inferred shape (8, 8)

// -----

func.func @chunk_divisible(%a: tensor<4x10xf16>) {
  %0, %1, %2 = kn.chunk %a {dim = 1 : i64} : tensor<4x10xf16> -> tensor<4x3xf16>, tensor<4x3xf16>, tensor<4x3xf16>
  func.return
}
// CHECK: kn.chunk: dim 1 (size 10) is not divisible into 3 chunks (one per result)

// -----

func.func @chunk_dim(%a: tensor<4x10xf16>) {
  %0, %1 = kn.chunk %a {dim = 2 : i64} : tensor<4x10xf16> -> tensor<4x5xf16>, tensor<4x5xf16>
  func.return
}
// CHECK: kn.chunk: chunk dim 2 is not a dimension of a rank-2 tensor

// -----

func.func @chunk_shape(%a: tensor<4x10xf16>) {
  %0, %1 = kn.chunk %a {dim = 1 : i64} : tensor<4x10xf16> -> tensor<4x5xf16>, tensor<2x10xf16>
  func.return
}
// CHECK: kn.chunk: result shape (2, 10) does not match the inferred shape (4, 5)

// -----

func.func @chunk_dtype(%a: tensor<4x10xf16>) {
  %0, %1 = kn.chunk %a {dim = 1 : i64} : tensor<4x10xf16> -> tensor<4x5xf16>, tensor<4x5xf32>
  func.return
}
// CHECK: kn.chunk: operands and results must share one element type, got ['f16', 'f32']

// -----

func.func @chunk_no_results(%a: tensor<4x10xf16>) {
  "kn.chunk"(%a) <{dim = 1 : i64}> : (tensor<4x10xf16>) -> ()
  func.return
}
// CHECK: kn.chunk: needs at least one result (one per chunk)

// -----

func.func @all_reduce_type(%a: tensor<4x10xf16>) {
  %0 = "kn.all_reduce"(%a) : (tensor<4x10xf16>) -> tensor<4x5xf16>
  func.return
}
// CHECK: kn.all_reduce: the result type tensor<4x5xf16> must equal the operand's type tensor<4x10xf16>

// -----

// ---- device limits and module-level checks (issue #29) ----

func.func @too_many_elements(%a: tensor<65536x32768xf16>) {
  %0 = kn.exp %a : tensor<65536x32768xf16>
  func.return
}
// CHECK: kn.exp: operand #0 has type tensor<65536x32768xf16> with 2147483648 elements, more than the 2147483647 that 32-bit indexing in the generated kernels reaches; split the tensor into smaller ones

// -----

func.func @integer_too_wide(%a: tensor<4x8xi128>) {
  %0 = kn.exp %a : tensor<4x8xi128>
  func.return
}
// CHECK: kn.exp: operand #0: element type i128 has 128 bits; device tensors hold integers of 1 to 64 bits

// -----

func.func @use_before_definition(%x: tensor<8x8xf16>) -> tensor<8x8xf16> {
  %b = kn.add %a, %x : tensor<8x8xf16>, tensor<8x8xf16> -> tensor<8x8xf16>
  %a = kn.exp %x : tensor<8x8xf16>
  func.return %b : tensor<8x8xf16>
}
// CHECK: @use_before_definition: kn.add (op #0 of its block): operand #0 (%a) is used before its definition; SSA values must be defined above their first use: move the defining op before this one

// -----

func.func @unused_argument_too_large(%a: tensor<2147483648xf16>) {
  func.return
}
// CHECK: @unused_argument_too_large: argument #0: has type tensor<2147483648xf16> with 2147483648 elements

// -----

func.func @output_strides_overlap(%x: tensor<8x8xf16>) -> (tensor<8x8xf16> {kn.strides = array<i64: 0, 1>}) {
  %a = kn.exp %x : tensor<8x8xf16>
  func.return %a : tensor<8x8xf16>
}
// CHECK: @output_strides_overlap: result #0: kn.strides = [0, 1] lets distinct elements of this output share an address (a dim of size > 1 with stride 0 < 1, the extent of the dims inside it); outputs need strides that keep every element apart, e.g. row-major

// -----

func.func @output_strides_interleaved(%x: tensor<8x8xf16>) -> (tensor<8x8xf16> {kn.strides = array<i64: 4, 1>}) {
  %a = kn.exp %x : tensor<8x8xf16>
  func.return %a : tensor<8x8xf16>
}
// CHECK: @output_strides_interleaved: result #0: kn.strides = [4, 1] lets distinct elements of this output share an address (a dim of size > 1 with stride 4 < 8

// -----

func.func @argument_strides_rank(%x: tensor<8x8xf16> {kn.strides = array<i64: 1>}) -> tensor<8x8xf16> {
  %a = kn.exp %x : tensor<8x8xf16>
  func.return %a : tensor<8x8xf16>
}
// CHECK: @argument_strides_rank: argument #0: kn.strides = [1] has 1 entry for a rank-2 tensor; give one stride per dim

// -----

func.func @argument_strides_not_an_array(%x: tensor<8x8xf16> {kn.strides = {}}) -> tensor<8x8xf16> {
  %a = kn.exp %x : tensor<8x8xf16>
  func.return %a : tensor<8x8xf16>
}
// CHECK: @argument_strides_not_an_array: argument #0: kn.strides must be an array of element strides, one per dim, e.g. array<i64: 4096, 1>; got {}

// -----

func.func @argument_strides_negative(%x: tensor<8x8xf16> {kn.strides = array<i64: -8, 1>}) -> tensor<8x8xf16> {
  %a = kn.exp %x : tensor<8x8xf16>
  func.return %a : tensor<8x8xf16>
}
// CHECK: @argument_strides_negative: argument #0: kn.strides = [-8, 1] has a negative stride; strides count elements forward from the tensor's start

// -----

func.func @argument_strides_span(%x: tensor<8x8xf16> {kn.strides = array<i64: 1073741824, 1>}) -> tensor<8x8xf16> {
  %a = kn.exp %x : tensor<8x8xf16>
  func.return %a : tensor<8x8xf16>
}
// CHECK: @argument_strides_span: argument #0: kn.strides = [1073741824, 1] spans 7516192776 elements, more than the 2147483647 that 32-bit indexing in the generated kernels reaches

// -----

func.func @op_strides_per_result(%x: tensor<8x8xf16>) -> tensor<8x8xf16> {
  %a = kn.exp %x {kn.strides = array<i64: 8, 1>} : tensor<8x8xf16>
  func.return %a : tensor<8x8xf16>
}
// CHECK: @op_strides_per_result: kn.exp (op #0 of its block): kn.strides must be a list with one array<i64> of strides per result (1), e.g. [array<i64: 64, 1>]

// -----

func.func @scalar_argument(%x: tensor<8x8xf16>, %n: i32) -> tensor<8x8xf16> {
  %a = kn.exp %x : tensor<8x8xf16>
  func.return %a : tensor<8x8xf16>
}
// CHECK: @scalar_argument: argument #1 has type i32; the inputs and outputs of a kernel graph are device tensors, e.g. tensor<8x64xf16>: pass scalars as op attributes

// -----

"func.func"() <{sym_name = "extra_arg_attrs", function_type = (tensor<8x8xf16>) -> tensor<8x8xf16>, arg_attrs = [{kn.strides = array<i64: 8, 1>}, {}]}> ({
^bb0(%x: tensor<8x8xf16>):
  %a = kn.exp %x : tensor<8x8xf16>
  func.return %a : tensor<8x8xf16>
}) : () -> ()
// CHECK: @extra_arg_attrs: 2 argument attribute dictionaries for 1 arguments; give one dictionary per argument (possibly empty, {})
