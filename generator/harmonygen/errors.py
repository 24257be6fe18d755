"""The generator's own errors."""

from __future__ import annotations


class SpecError(ValueError):
    """A spec or grammar file is missing something, has the wrong shape, or contradicts another one."""
