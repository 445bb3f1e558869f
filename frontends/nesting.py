"""An up-front check of how deeply an input text nests brackets, so that the recursive
parsers (xDSL's, Python's json) never exhaust the interpreter's stack: a deeper input gets a
located error instead of a RecursionError (target/device.py `MAX_NESTING_DEPTH`)."""

from __future__ import annotations

import re

from mirage_xdsl.target.device import MAX_NESTING_DEPTH

# string literals and // comments are skipped whole; `->` is an arrow, not a closing `>`
_TOKEN = re.compile(r'"(?:[^"\\\n]|\\.)*"|//[^\n]*|->|[\[\](){}<>]')
_OPENERS = frozenset("([{<")


class NestingError(ValueError):
    """The input nests brackets deeper than MAX_NESTING_DEPTH; the message is located."""


def nesting_error(
    text: str, name: str, max_depth: int = MAX_NESTING_DEPTH, line_offset: int = 0, what: str = ""
) -> str | None:
    """Where and why `text` nests brackets (`(`, `[`, `{`, `<`) more than `max_depth` levels
    deep, as `name:line:col: <what>brackets nest ...` (1-based line, counting `line_offset`
    lines before the text; `what` is a prefix such as "malformed JSON: "), or None when it
    does not.  Strings and `//` comments are not counted; unbalanced closers are tolerated
    (the parser reports them)."""
    depth = 0
    for match in _TOKEN.finditer(text):
        token = match.group()
        if token in _OPENERS:
            depth += 1
            if depth > max_depth:
                line = text.count("\n", 0, match.start()) + 1 + line_offset
                col = match.start() - (text.rfind("\n", 0, match.start()) + 1) + 1
                return (
                    f"{name}:{line}:{col}: {what}brackets nest deeper than {max_depth} levels here; kernel graphs "
                    "need far fewer, so the input is malformed (check for unclosed or repeated brackets)"
                )
        elif len(token) == 1:
            depth = max(0, depth - 1)
    return None


def check_nesting(text: str, name: str, line_offset: int = 0) -> None:
    """Raise when `text` nests brackets too deeply (see `nesting_error`).

    Raises:
        NestingError: naming the file, line and column where the limit is passed.
    """
    if (err := nesting_error(text, name, line_offset=line_offset)) is not None:
        raise NestingError(err)
