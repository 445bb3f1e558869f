"""Ways into the IR: each frontend builds kernel graphs (`kn`, with `tb` block graphs) as xDSL modules.

* `builder.py` / `tb_builder.py`: the Python builder API in the spirit of Mirage's `mirage`
  module (`KNGraph`, `TBGraph`; shared argument checks and tensor handles in
  `builder_common.py`);
* `mugraph_import.py` / `mugraph_export.py` (with `mugraph_schema.py`, `mugraph_fields.py`):
  Mirage saved-muGraph JSON files in and out; `mugraph_target.py` is the `-t mugraph` target;
* `einsum.py`: a binary einsum as one `contraction.contract`; `tc/`: the Tensor
  Comprehensions language;
* `nesting.py`: the bracket-depth check that guards the recursive parsers.
"""
