"""The one exception type the package raises for format problems."""

from __future__ import annotations


class HarmonyError(RuntimeError):
    """Raised for rendering, encoding and parsing errors, with the reference's message texts."""
