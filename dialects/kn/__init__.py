"""The `kn` dialect: attributes, types and ops (`ops.py`)."""

from mirage_xdsl.dialects.kn.ops import *  # noqa: F403
from mirage_xdsl.dialects.kn.strides import dtensor_strides  # noqa: F401
