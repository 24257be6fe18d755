"""What every Open Responses model shares: the base class, the extension item and item tagging.

Hand-written behaviour the JSON Schemas imply but datamodel-code-generator does not produce; the
models in `_models.py` are generated on top of it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

VENDOR_TYPE_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]*:[A-Za-z0-9_.:-]+$"


class SpecModel(BaseModel):
    """Base of every generated model.

    Serialising keeps a key that the schema requires even when its value is `None` (the schema's
    "required but nullable", written as `null`), and leaves out an optional key left at `None` (absent
    upstream); an optional key given `null` explicitly stays. Unknown keys are kept, as JSON Schema
    allows them, so a load and a dump lose nothing. Field names that clash with Python or pydantic
    (`schema`) are aliased and dumped by alias.
    """

    model_config = ConfigDict(
        extra="allow",
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
    )
    spec_optional_keys: ClassVar[tuple[tuple[str, str], ...]] = ()  # (field name, wire key)

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        cls.spec_optional_keys = tuple(
            (name, field.alias or name) for name, field in cls.model_fields.items() if not field.is_required()
        )

    @model_serializer(mode="wrap")
    def _leave_out_absent_keys(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if isinstance(data, dict):
            given = self.model_fields_set
            for name, key in self.spec_optional_keys:
                if data.get(key, 0) is None and name not in given:
                    del data[key]
        return data


class ExtensionItem(SpecModel):
    """An item of a vendor-prefixed type (`slug:type`), which the spec leaves to implementations.

    Every key besides `type` is kept as an extra field.
    """

    type: str = Field(pattern=VENDOR_TYPE_PATTERN)


def is_vendor_type(value: object) -> bool:
    """True for a `slug:type` item type."""
    if not isinstance(value, str):
        return False
    slug, sep, rest = value.partition(":")
    return bool(sep and slug and rest)


def item_discriminator(table: Mapping[tuple[str | None, str | None], str], fallback: str) -> Callable[[Any], str]:
    """The tag function of an item union: (type, role) → model name; vendor types → `fallback`.

    An item whose type has variants by role takes its role's variant; with a role none of them takes it has no
    member (the role's error), rather than the type's role-less variant (an untyped `{"role": "usr"}` is no item
    reference)."""
    by_role = frozenset(kind for kind, role in table if role is not None)

    def item_tag(value: Any) -> str:
        if isinstance(value, dict):
            kind, role = value.get("type"), value.get("role")
        else:
            kind, role = getattr(value, "type", None), getattr(value, "role", None)
        if not isinstance(kind, str | None) or not isinstance(role, str | None):
            return f"{kind!r} (role {role!r})"  # a list or object where a tag belongs: no member's tag
        found = table.get((kind, role))
        if found is None and (role is None or kind not in by_role):
            found = table.get((kind, None))
        if found is not None:
            return found
        if is_vendor_type(kind):
            return fallback
        return f"{kind!r} (role {role!r})" if role is not None else repr(kind)

    return item_tag
