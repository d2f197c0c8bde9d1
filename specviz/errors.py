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


def digits(x: object) -> str:
    """A number for a message, with every digit that tells it from its neighbours.

    ``repr`` of the float64: a row summing to 1 + 2e-9 reads "1.000000002", where ``.6g``
    printed "1" and the message rounded away its own problem.
    """
    text = repr(float(x))  # type: ignore[arg-type]
    return text.removesuffix(".0")  # "4", not "4.0"
