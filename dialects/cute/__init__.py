"""The `cute` dialect: attributes, types and ops (`ops.py`)."""

from mirage_xdsl.dialects.cute.ops import *  # noqa: F403
