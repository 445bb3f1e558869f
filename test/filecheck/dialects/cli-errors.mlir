// Without --verify-diagnostics, mirage-opt reports a verification error as ONE line
// `mirage-opt: error: <op>: <rule>` on stderr, exits non-zero, and prints no traceback
// (the exact exit status 1 is checked by test/test_dialects.py).
// RUN: not mirage-opt %S/Inputs/bad_kn_matmul.mlir 2>&1 | filecheck %s --check-prefix=KN
// RUN: not mirage-opt %S/Inputs/bad_tb_graph.mlir 2>&1 | filecheck %s --check-prefix=TB
// RUN: not mirage-opt %S/Inputs/bad_accum_kind.mlir 2>&1 | filecheck %s --check-prefix=PARSE
// RUN: not mirage-opt %S/Inputs/bad_kn_matmul.mlir 2>/dev/null | filecheck %s --check-prefix=STDOUT --allow-empty
// RUN: not mirage-opt %S/Inputs/deep_nesting.mlir 2>&1 | filecheck %s --check-prefix=NEST

// KN-NOT:     Traceback
// KN:         {{^}}mirage-opt: error: kn.matmul: contraction dims differ: lhs[-1] = 8 vs rhs[-2] = 4{{$}}
// KN-NOT:     {{.}}

// TB-NOT:     Traceback
// TB:         {{^}}mirage-opt: error: tb.input: dim 0 (size 6) is not divisible by grid_dim.x = 4{{$}}
// TB-NOT:     {{.}}

// A parse error starts with its location and names the problem (xDSL adds the source line
// and a caret line).
// PARSE-NOT:  Traceback
// PARSE:      {{^}}mirage-opt: error: {{.*}}bad_accum_kind.mlir:6:27
// PARSE:      unknown accumulator kind 'red_ld_avg' (expected one of nored,
// PARSE-NOT:  Traceback

// Nesting deeper than the parser's recursion can take is refused up front, located (issue #29).
// NEST-NOT:   Traceback
// NEST:       {{^}}mirage-opt: error: {{.*}}deep_nesting.mlir:2:66: brackets nest deeper than 32 levels here;{{.*}}{{$}}
// NEST-NOT:   {{.}}

// Nothing reaches stdout.
// STDOUT-NOT: {{.}}
