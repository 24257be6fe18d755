"""The generated tables this runtime reads, checked against the format version it was written for.

Every runtime module takes the facts of the format from here, never from `_generated` directly, so a
package whose generated modules come from another version of harmonygen fails at import with a message
saying what to regenerate, instead of misbehaving later (tree-sitter's ABI check is the model).
"""

from __future__ import annotations

from ._generated import FORMAT_VERSION, grammar, spec
from ._generated.enums import HarmonyEncodingName, ItemKind, ReasoningEffort, Role, Terminator

RUNTIME_FORMAT_VERSION = 1
"""The version of the generated tables' layout that this runtime reads."""

if FORMAT_VERSION != RUNTIME_FORMAT_VERSION:
    raise ImportError(
        f"harmony_responses: the generated tables have format version {FORMAT_VERSION}, this runtime reads "
        f"version {RUNTIME_FORMAT_VERSION}; regenerate with `harmonygen generate` from the matching generator"
    )

__all__ = [
    "FORMAT_VERSION",
    "HarmonyEncodingName",
    "ItemKind",
    "ReasoningEffort",
    "Role",
    "Terminator",
    "grammar",
    "spec",
]
