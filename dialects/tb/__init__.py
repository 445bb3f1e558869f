"""The `tb` dialect: attributes, types and ops (`ops.py`)."""

from mirage_xdsl.dialects.tb.ops import *  # noqa: F403
