"""The demo engine's JSON Schema instances: small, the same every time, and valid under the schema."""

from __future__ import annotations

import enum
import json
from typing import Any, Literal

import jsonschema
import pytest
from pydantic import BaseModel, Field

from harmony_responses.server.engines.instance import instance


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Leaf(BaseModel):
    name: str = Field(min_length=5, max_length=8)
    weight: float = Field(gt=0.5, le=0.75)
    count: int = Field(ge=3, multiple_of=4)


class Tree(BaseModel):
    colour: Colour
    kind: Literal["oak"]
    leaves: list[Leaf] = Field(min_length=2)
    parent: Tree | None
    pair: tuple[int, str]
    tags: dict[str, int]
    when: str = Field(json_schema_extra={"format": "date-time"})


SCHEMAS: list[dict[str, Any]] = [
    {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"], "additionalProperties": False},
    {"type": "array", "items": {"type": "integer", "minimum": 10}, "minItems": 3, "uniqueItems": True},
    {"anyOf": [{"type": "null"}, {"type": "object", "required": ["x"], "properties": {"x": {"const": 2}}}]},
    {"oneOf": [{"type": "string", "minLength": 12}, {"type": "integer"}]},
    {
        "allOf": [
            {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
            {"properties": {"b": {"enum": [None, 1]}}, "required": ["b"]},
        ]
    },  # fmt: skip
    {"$defs": {"n": {"$ref": "#/$defs/m"}, "m": {"type": "number", "exclusiveMaximum": 0}}, "$ref": "#/$defs/n"},
    {"definitions": {"p": {"type": "boolean"}}, "type": "array", "prefixItems": [{"$ref": "#/definitions/p"}]},
    {"type": ["null", "string"], "format": "email"},
    {"type": "object", "minProperties": 1, "properties": {"k": {"type": "string", "format": "uuid"}}},
    {"type": "integer", "minimum": 7, "maximum": 9, "multipleOf": 3},
    {},
    Tree.model_json_schema(),
    Leaf.model_json_schema(),
]


@pytest.mark.parametrize("schema", SCHEMAS, ids=range(len(SCHEMAS)))
def test_instances_are_valid_and_deterministic(schema: dict[str, Any]) -> None:
    before = json.dumps(schema, sort_keys=True)
    value = instance(schema)
    jsonschema.validate(value, schema)
    assert instance(schema) == value and json.dumps(schema, sort_keys=True) == before  # same, schema unchanged


def test_pydantic_models_parse_the_instance() -> None:
    tree = Tree.model_validate_json(json.dumps(instance(Tree.model_json_schema())))
    assert tree.parent is None and len(tree.leaves) == 2 and tree.colour is Colour.RED


def test_a_schema_that_refers_to_itself_ends() -> None:
    schema = {"$defs": {"node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}},
                                 "required": ["next"]}}, "$ref": "#/$defs/node"}  # fmt: skip
    value = instance(schema)  # an impossible schema (an endless chain): a bounded guess, not a hang
    depth = 0
    while isinstance(value, dict):
        value, depth = value["next"], depth + 1
    assert depth <= 40
