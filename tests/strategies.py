"""hypothesis strategies for JSON Schemas, tools and Harmony conversations."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from harmony_responses import (
    Author,
    ChannelConfig,
    Conversation,
    DeveloperContent,
    Message,
    ReasoningEffort,
    Role,
    SystemContent,
    TextContent,
    ToolDescription,
    ToolNamespaceConfig,
)

# Lone surrogates cannot travel through JSON to the reference, so they are left out.
text = st.text(st.characters(blacklist_categories=["Cs"]), max_size=30)
word = st.text(st.characters(min_codepoint=33, max_codepoint=126, blacklist_characters="<|>"), min_size=1, max_size=12)
identifier = st.from_regex(r"[a-z_][a-z0-9_]{0,10}", fullmatch=True)
# Decimal literals of ordinary size: the reference parses JSON floats without round-trip precision,
# so long or far-exponent floats can reach its renderer one ulp off (we keep the exact value).
floats = st.builds(lambda n, k: n / 10**k, st.integers(-(10**9), 10**9), st.integers(0, 6))
json_scalar = st.one_of(st.none(), st.booleans(), st.integers(-(2**40), 2**40), text, floats)
json_value = st.recursive(
    json_scalar,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(identifier, inner, max_size=3)),
    max_leaves=6,
)


def _decorate(base: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    extras = st.fixed_dictionaries(
        {},
        optional={
            "description": text,
            "title": text,
            "default": json_value,
            "nullable": st.booleans(),
            "examples": st.lists(st.one_of(text, st.integers()), max_size=2),
        },
    )
    return st.builds(lambda b, e: {**b, **e}, base, extras)


scalar_schema = _decorate(
    st.one_of(
        st.sampled_from([{"type": t} for t in ("string", "number", "integer", "boolean", "null", "array", "weird")]),
        st.builds(
            lambda values: {"type": "string", "enum": values}, st.lists(st.one_of(text, st.integers()), max_size=3)
        ),
        st.builds(
            lambda types: {"type": types},
            st.lists(st.sampled_from(["string", "integer", "number", "null"]), max_size=3),
        ),
        st.just({}),
        st.just({"anyOf": [{"type": "string"}]}),
    )
)


def _object(props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": [k for k in required if k in props]}


schema = st.recursive(
    scalar_schema,
    lambda inner: _decorate(
        st.one_of(
            st.builds(_object, st.dictionaries(identifier, inner, max_size=4), st.lists(identifier, max_size=3)),
            st.builds(lambda items: {"type": "array", "items": items}, inner),
            st.builds(lambda variants: {"oneOf": variants}, st.lists(inner, max_size=3)),
        )
    ),
    max_leaves=8,
)

tool = st.builds(
    ToolDescription,
    name=identifier,
    description=text,
    parameters=st.one_of(
        st.none(), schema, st.builds(_object, st.dictionaries(identifier, schema, max_size=3), st.lists(identifier))
    ),
)
namespace = st.builds(
    ToolNamespaceConfig, name=identifier, description=st.one_of(st.none(), text), tools=st.lists(tool, max_size=3)
)
namespaces = st.lists(namespace, max_size=2).map(lambda nss: {ns.name: ns for ns in nss})

system_content = st.builds(
    SystemContent,
    model_identity=st.one_of(st.none(), text),
    reasoning_effort=st.one_of(st.none(), st.sampled_from(list(ReasoningEffort))),
    conversation_start_date=st.one_of(st.none(), text),
    knowledge_cutoff=st.one_of(st.none(), text),
    channel_config=st.one_of(
        st.none(), st.builds(ChannelConfig, valid_channels=st.lists(word, max_size=3), channel_required=st.booleans())
    ),
    tools=st.one_of(st.none(), namespaces),
)
developer_content = st.builds(
    DeveloperContent,
    instructions=st.one_of(st.none(), text),
    tools=st.one_of(
        st.none(),
        namespaces,
        st.lists(tool, max_size=3).map(lambda ts: {"functions": ToolNamespaceConfig(name="functions", tools=ts)}),
    ),
)
channel = st.one_of(st.none(), st.sampled_from(["analysis", "commentary", "final"]), word)
recipient = st.one_of(st.none(), st.just("all"), word.map(lambda w: "functions." + w), word)
content_type = st.one_of(st.none(), st.sampled_from(["json", "<|constrain|>json", "code", "<|constrain|>"]), word)


@st.composite
def message(draw: st.DrawFn) -> Message:
    role = draw(st.sampled_from(list(Role)))
    if role is Role.SYSTEM and draw(st.booleans()):
        contents: list[Any] = [draw(system_content)]
    elif role is Role.DEVELOPER and draw(st.booleans()):
        contents = [draw(developer_content)]
    else:
        contents = [TextContent(text=t) for t in draw(st.lists(text, min_size=1, max_size=2))]
    name = draw(word) if role is Role.TOOL else draw(st.one_of(st.none(), word))
    return Message(
        author=Author(role=role, name=name),
        content=contents,
        channel=draw(channel),
        recipient=draw(recipient),
        content_type=draw(content_type),
    )


conversation = st.lists(message(), max_size=6).map(Conversation.from_messages)
