"""The one exception the mesoscale builders raise for bad input."""

from __future__ import annotations


class MicrostructureError(ValueError):
    """Bad grain or label-map input; the message starts with the sample name and says what is wrong."""
