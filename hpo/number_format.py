"""Numbers as the report's tables show them: rounded to significant digits, never 16 of them."""

from __future__ import annotations

import math
from typing import Any

#: significant digits of a hyperparameter, an error or a weight in the report's tables
DIGITS = 4


def significant(value: float, digits: int = DIGITS) -> str:
    """``value`` to ``digits`` significant digits, plain or in exponent notation, whichever
    Python's ``g`` format picks (``0.0003162``, ``1.235e-05``, ``128``); ``nan``/``inf`` as words."""
    if not math.isfinite(value):
        return str(value)
    return f"{value:.{digits}g}"


def cell_text(value: Any, digits: int = DIGITS) -> str:
    """A table cell: a float to ``digits`` significant digits, None as empty, anything else as text
    (integers and booleans exactly)."""
    if value is None:
        return ""
    if isinstance(value, float):
        return significant(value, digits)
    return str(value)
