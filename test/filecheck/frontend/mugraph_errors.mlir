// Import errors are one line, name the graph, the operator and the rule; exit code 1.
// RUN: not mirage-opt %S/Inputs/rmsnorm_bad_tile.json 2>&1 | filecheck %s --check-prefix=TILE
// RUN: echo '[[{"op_type": "kn_bogus_op", "input_tensors": [], "output_tensors": []}]]' | not mirage-opt -f mugraph 2>&1 | filecheck %s --check-prefix=UNKNOWN
// RUN: echo '[[{"op_type": "kn_input_op"' | not mirage-opt -f mugraph 2>&1 | filecheck %s --check-prefix=JSON

// TILE:      mirage-opt: error: rmsnorm_bad_tile.json: graph 0, op 2 (kn_customized_op), tb op 1 (tb_input_op): tile dim 1 (size 24) recomputed from the maps differs from the stored size 32 (dtensor [4096,6144], grid [256,1,1], input_map [1,-1,-1], forloop_dim 0, forloop_range 32); stored dims [128,32]
// TILE-NOT:  Traceback

// UNKNOWN:     mirage-opt: error: stdin: graph 0, op 0 (kn_bogus_op): unknown or unsupported kernel operator type 'kn_bogus_op'
// UNKNOWN-NOT: Traceback

// JSON:     mirage-opt: error: stdin: malformed JSON: Expecting
// JSON-NOT: Traceback
