"""The one exception type specviz raises for bad input."""

from __future__ import annotations


class InputError(ValueError):
    """Bad input: the message names the argument, what was expected and what was got.

    A ``ValueError`` subclass, so callers that already catch ``ValueError`` keep working.
    """

    def __init__(self, argument: str, expected: str, got: str) -> None:
        self.argument = argument
        self.expected = expected
        self.got = got
        super().__init__(f"{argument}: expected {expected}, got {got}")
