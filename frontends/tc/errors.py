"""The one error type of the Tensor Comprehensions frontend."""

from __future__ import annotations

__all__ = ["TcError"]


class TcError(ValueError):
    """An invalid or unsupported TC program, located at one source position.

    `str(err)` is the one-line diagnostic `FILE:LINE:COL: error: MESSAGE`.

    Attributes:
        filename: the source's name (`<tc>` for a string without a file).
        line, col: 1-based position of the offending token.
        message: what is wrong, naming the variable and the rule it breaks.
    """

    def __init__(self, message: str, line: int, col: int, filename: str = "<tc>"):
        self.message = message
        self.line = max(int(line), 1)
        self.col = max(int(col), 1)
        self.filename = filename
        super().__init__(f"{self.location}: error: {message}")

    @property
    def location(self) -> str:
        """`FILE:LINE:COL` of the error."""
        return f"{self.filename}:{self.line}:{self.col}"
