"""harmonygen: reads the Harmony and Open Responses specs into an IR and renders the templates."""

from __future__ import annotations

__version__ = "0.1.0"

from .engine import GenerateResult, check, generate, write  # noqa: E402

__all__ = ["GenerateResult", "__version__", "check", "generate", "write"]
