"""mirage_xdsl: Mirage's multi-level tensor-program compiler as an xDSL dialect stack."""
