"""`demo`: a deterministic stand-in for a model, so a fresh clone can serve and be tried without a GPU.

It is not a model and says so in every answer. It reads the prompt's token ids as a model would and
answers in valid Harmony by rule:

- the prompt declares functions and no tool output follows the last user message → reasoning, then
  a call to a declared function (the first one the user's text names, else the first declared), with
  arguments built from the function's JSON Schema (required properties, example values);
- a tool output follows → reasoning, then an answer quoting the output;
- the system message declares the `browser` tool (the server runs `web_search`) and the user's last message
  asks to search → `browser.search` for that message, then `browser.open` of the first hit, then `browser.find`
  of its longest word (the last of the longest; or of words the user put in quotes), then an answer citing the
  line found (`【{cursor}†L{n}】`); a browser error on the way → an answer that reports it;
- the system message declares the `python` tool (the server runs `code_interpreter`) and the user's last message
  holds a fenced code block (```` ```python ... ``` ````) → a call to `python` with that code, then (a tool output
  follows) an answer quoting what python said;
- the system message declares a namespace of its own (an MCP server's tools, when the server runs `mcp` tools),
  the user's last message names one of its tools as `NS.TOOL` and no tool output follows it → reasoning, then a
  call to `NS.TOOL`, each required parameter an example of its type (read from the namespace's text);
- otherwise → reasoning, then an answer quoting the user's last message;
- the prompt ends inside a call's header (the server forced the call) → the arguments and `<|call|>`;
- the prompt ends inside the answer's header and the request carries a JSON Schema (the second step of a
  structured output) → a small valid instance of the schema (`instance`) and `<|return|>`.

Text in the prompt stays text: the quoted user message is encoded as ordinary tokens, whatever it spells.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncGenerator, Sequence

from ..._tables import spec as _spec
from ...bridge.tools import recipient
from ...encoding import HarmonyEncoding
from ...models import Conversation, Message, Role, ToolNamespaceConfig
from ...stream import ParsedMessage, parse_tokens
from ...texts import fill
from ...tool_namespace import render_tool_namespace
from ..calls import FUNCTIONS_PREFIX, call_header
from ..offload import off_loop
from .base import Engine, EngineInfo, EngineOutput, EngineRequest, Finished, FinishReason, Tokens, ToolSpec
from .instance import instance

_QUOTE_LIMIT = 500  # characters of the user's message or the tool output quoted back
_BROWSER = ToolNamespaceConfig.browser()
_BROWSER_BLOCK = render_tool_namespace(_BROWSER.name, _BROWSER.tools, _BROWSER.description)
_BROWSER_PREFIX = _BROWSER.name + _spec.HEADER_NAMESPACE_SEPARATOR
_SEARCH, _OPEN, _FIND = (_BROWSER_PREFIX + t.name for t in _BROWSER.tools)
_ASKS_TO_SEARCH = re.compile(r"\b(search|look up|browse)\b", re.IGNORECASE)


def _reading(text: str, **groups: str) -> str:
    """A pattern that reads the spec's `text` as filled: each placeholder `{name}` read by `groups[name]`."""
    pattern = re.escape(text)
    for name, group in groups.items():
        pattern = pattern.replace(re.escape("{" + name + "}"), group)
    return pattern


# How the demo reads the browser's display (spec/harmony/format.json's `browser_display`).
_CURSOR = re.compile("^" + _reading(_spec.BROWSER_DISPLAY.partition("{title}")[0], cursor=r"(\d+)"))  # its cursor
_MATCH = re.compile(_reading(_spec.BROWSER_FIND_MATCH, n=r"\d+", line=r"(\d+)"))  # a `find` match's line
_NUMBERED = re.compile("^" + _reading(_spec.BROWSER_LINE.partition("{text}")[0], n=r"\d+"))  # a line's number
_FIRST_HIT = _spec.BROWSER_LINK_OPEN + "0" + _spec.BROWSER_LINK_SEPARATOR  # a search page's first link
# A namespace the system message declares, its tools, and a tool's parameters (the `# Tools` text's shapes).
_NAMESPACE_BLOCK = re.compile(r"^namespace ([\w-]+) \{\n(.*?)^\} // namespace \1$", re.MULTILINE | re.DOTALL)
_TOOL_TYPE = re.compile(r"^type (\w+) = \(_: \{\n(.*?)^\}\) => any;$", re.MULTILINE | re.DOTALL)
_PROPERTY = re.compile(r"^(\w+)(\??): ([\w\[\]]+)", re.MULTILINE)
_EXAMPLES: dict[str, object] = {"number": 1, "string": "demo", "boolean": True}
_BUILT_IN = frozenset({_spec.HEADER_FUNCTION_NAMESPACE, *_spec.BUILTIN_NAMESPACES})
_QUOTED = re.compile(r"[\"“]([^\"”]+)[\"”]")
_PYTHON = ToolNamespaceConfig.python()
_PYTHON_BLOCK = render_tool_namespace(_PYTHON.name, _PYTHON.tools, _PYTHON.description)
_FENCED = re.compile(r"```[A-Za-z0-9_+-]*\n(.*?)```", re.DOTALL)  # a Markdown code block: the code to run


def _namespace_tools(system: str) -> dict[str, dict[str, object]]:
    """`NS.TOOL` → example arguments, for each tool of each namespace of its own the system message declares (not the
    format's built-in ones): every required parameter an example of its type."""
    out: dict[str, dict[str, object]] = {}
    for block in _NAMESPACE_BLOCK.finditer(system):
        if block.group(1) in _BUILT_IN:
            continue
        for tool in _TOOL_TYPE.finditer(block.group(2)):
            arguments: dict[str, object] = {}
            for prop in _PROPERTY.finditer(tool.group(2)):
                kind = prop.group(3)
                if not prop.group(2):
                    example = _EXAMPLES.get(kind.removesuffix("[]"))
                    arguments[prop.group(1)] = [example] if kind.endswith("[]") else example
            out[block.group(1) + _spec.HEADER_NAMESPACE_SEPARATOR + tool.group(1)] = arguments
    return out


example_value = instance  # the arguments of a call, the answer of a structured output (see .instance)


class DemoEngine(Engine):
    """The demo engine; `tokens_per_second` 0 streams as fast as the server reads."""

    def __init__(self, encoding: HarmonyEncoding, *, tokens_per_second: float = 0.0, chunk: int = 4) -> None:
        super().__init__()
        self.encoding = encoding
        self.tokens_per_second = tokens_per_second
        self.chunk = max(1, chunk)
        self.info = EngineInfo(kind="demo", target="", output="tokens", json_constraint=True)
        self._head = encoding.render_conversation_for_completion(Conversation(messages=[]), Role.ASSISTANT)
        self._role = self._head[1:]  # the tokens of the word `assistant` after <|start|>

    # -- the rules --------------------------------------------------------------------------------

    def _render(self, messages: Sequence[Message], *, last_returns: bool) -> list[int]:
        out: list[int] = []
        for message in messages:
            out += self.encoding.render(message)
        if out[: len(self._head)] == self._head:
            out = out[len(self._head) :]  # the prompt already ends with <|start|>assistant
        if last_returns:
            out[-1] = _spec.TOKEN_END_DONE_SAMPLING
        return out

    def _arguments(self, tool: ToolSpec) -> str:
        return json.dumps(example_value(tool.parameters or {"type": "object"}), ensure_ascii=False)

    def completion(self, request: EngineRequest) -> list[int]:
        """The completion the rules give for this prompt."""
        prompt = request.prompt
        start = len(prompt) - 1 - prompt[::-1].index(_spec.TOKEN_START) if _spec.TOKEN_START in prompt else 0
        if prompt and prompt[-1] == _spec.TOKEN_MESSAGE and start > 0:  # a header the server wrote: its body remains
            header = self.encoding.decode(prompt[start:])
            tool = next((t for t in request.tools if recipient(t.name) in header), None)
            if tool is None and FUNCTIONS_PREFIX not in header and request.json_schema is not None:
                answer = json.dumps(instance(request.json_schema), ensure_ascii=False)
                return self.encoding.encode(answer, disallowed_special=()) + [_spec.TOKEN_END_DONE_SAMPLING]
            args = self._arguments(tool) if tool is not None else "{}"
            return self.encoding.encode(args, disallowed_special=()) + [_spec.TOKEN_CALL]
        messages = parse_tokens(self.encoding, prompt[:start], role=None, mode="lenient")
        user_at = max((i for i, m in enumerate(messages) if m.role is Role.USER), default=-1)
        user_text = messages[user_at].content if user_at >= 0 else ""
        outputs = [m for m in messages[user_at + 1 :] if m.role is Role.TOOL]
        system = next((m.content for m in messages if m.role is Role.SYSTEM), "")
        if _BROWSER_BLOCK in system and _ASKS_TO_SEARCH.search(user_text):
            browsing = self._browse(user_text, outputs)
            if browsing is not None:
                return browsing
        fenced = _FENCED.search(user_text) if _PYTHON_BLOCK in system else None
        if fenced is not None and not outputs:
            thought = "The user gave me code to run, so I run it with python. (demo engine)"
            return self._tool_call(thought, _PYTHON.name, fenced.group(1).rstrip("\n"))
        if not outputs:
            named = next((n for n in _namespace_tools(system) if n in user_text), None)
            if named is not None:
                thought = f"The user asks for the tool {named}, so I call it. (demo engine)"
                call = [_spec.TOKEN_START, *self._role, *call_header(self.encoding, named)]
                arguments = json.dumps(_namespace_tools(system)[named], ensure_ascii=False)
                call += self.encoding.encode(arguments, disallowed_special=()) + [_spec.TOKEN_CALL]
                return self._render([self._analysis(thought)], last_returns=False) + call
        if outputs:
            return self._after_tool(outputs[-1])
        if request.tools:
            tool = next((t for t in request.tools if t.name in user_text), request.tools[0])
            thought = f"The user asks something the function {tool.name} can answer, so I call it. (demo engine)"
            call = [_spec.TOKEN_START, *self._role, *call_header(self.encoding, tool.name)]
            call += self.encoding.encode(self._arguments(tool), disallowed_special=()) + [_spec.TOKEN_CALL]
            return self._render([self._analysis(thought)], last_returns=False) + call
        words = len(user_text.split())
        thought = (
            f"The user's last message has {words} word{'' if words == 1 else 's'}. I am the demo engine, a "
            "deterministic stand-in "
            "for a model: I answer by rule and quote the message back."
        )
        answer = (
            "This is the harmony-responses demo engine, a deterministic stand-in for a model (no model ran). "
            f"You said: {user_text[:_QUOTE_LIMIT]}"
        )
        return self._render([self._analysis(thought), self._final(answer)], last_returns=True)

    def _browse(self, user_text: str, outputs: Sequence[ParsedMessage]) -> list[int] | None:
        """The next step of a search the user asked for (None: the browser's part is over)."""
        if outputs and not (outputs[-1].name or "").startswith(_BROWSER_PREFIX):
            return None  # another tool answered last
        last = outputs[-1] if outputs else None
        cursor = _CURSOR.match(last.content) if last is not None else None
        if last is None:
            thought = "The user asks me to search the web, so I search. (demo engine)"
            return self._browser_call(thought, _SEARCH, {"query": user_text[:_QUOTE_LIMIT]})
        if cursor is None:  # the browser reported an error
            answer = f"The demo engine's web search failed: {last.content[:_QUOTE_LIMIT]}"
            return self._render(
                [self._analysis("The browser failed. (demo engine)"), self._final(answer)], last_returns=True
            )
        if last.name == _SEARCH:
            if _FIRST_HIT not in last.content:
                answer = f"The demo engine searched, and found nothing: {last.content[:_QUOTE_LIMIT]}"
                return self._render(
                    [self._analysis("No results. (demo engine)"), self._final(answer)], last_returns=True
                )
            thought = "I open the first result. (demo engine)"
            return self._browser_call(thought, _OPEN, {"id": 0, "cursor": int(cursor.group(1))})
        if last.name == _OPEN:
            quoted = _QUOTED.search(user_text)
            words = re.findall(r"\w{4,}", user_text)
            pattern = quoted.group(1) if quoted else (max(reversed(words), key=len) if words else user_text[:20])
            thought = f"I look for {pattern!r} in the page. (demo engine)"
            return self._browser_call(thought, _FIND, {"pattern": pattern, "cursor": int(cursor.group(1))})
        opened = next((m for m in reversed(outputs) if m.name == _OPEN and _CURSOR.match(m.content)), None)
        match = _MATCH.search(last.content)
        page = _CURSOR.match(opened.content) if opened is not None else None
        if match is None or page is None:
            answer = f"The demo engine searched and opened a page, but found no match: {last.content[:_QUOTE_LIMIT]}"
            return self._render([self._analysis("No match. (demo engine)"), self._final(answer)], last_returns=True)
        after = last.content[match.end() :].split("\n", 2)
        line = _NUMBERED.sub("", after[1]) if len(after) > 1 else ""
        answer = (
            "The demo engine (a deterministic stand-in for a model) searched the web and found: "
            f"{line.strip()[:_QUOTE_LIMIT]} " + fill(_spec.BROWSER_CITATION, cursor=page.group(1), line=match.group(1))
        )
        return self._render(
            [self._analysis("I cite the line I found. (demo engine)"), self._final(answer)], last_returns=True
        )

    def _browser_call(self, thought: str, recipient: str, arguments: dict[str, object]) -> list[int]:
        return self._tool_call(thought, recipient, json.dumps(arguments, ensure_ascii=False))

    def _tool_call(self, thought: str, recipient: str, body: str) -> list[int]:
        """Reasoning, then a built-in tool's call on the reasoning channel, as gpt-oss writes one."""
        call = Message.from_role_and_content(Role.ASSISTANT, body).with_channel(_spec.CHANNEL_REASONING)
        out = self._render([self._analysis(thought), call.with_recipient(recipient)], last_returns=False)
        out[-1] = _spec.TOKEN_CALL
        return out

    def _after_tool(self, output: ParsedMessage) -> list[int]:
        name = (output.name or "").removeprefix(FUNCTIONS_PREFIX)
        thought = f"The function {name} returned its output; I report it. (demo engine)"
        answer = (
            f"The demo engine (a deterministic stand-in for a model) received from {name}: "
            f"{output.content[:_QUOTE_LIMIT]}"
        )
        return self._render([self._analysis(thought), self._final(answer)], last_returns=True)

    @staticmethod
    def _analysis(text: str) -> Message:
        return Message.from_role_and_content(Role.ASSISTANT, text).with_channel(_spec.CHANNEL_REASONING)

    @staticmethod
    def _final(text: str) -> Message:
        return Message.from_role_and_content(Role.ASSISTANT, text).with_channel(_spec.CHANNEL_ANSWER)

    # -- streaming ----------------------------------------------------------------------------------

    async def produce(self, request: EngineRequest) -> AsyncGenerator[EngineOutput, None]:
        tokens = await off_loop(self.completion, request)  # it parses the whole prompt: not on the event loop
        played = tokens[: request.max_tokens]
        loop = asyncio.get_running_loop()
        start = loop.time()
        interval = self.chunk / self.tokens_per_second if self.tokens_per_second else 0.0
        for k, i in enumerate(range(0, len(played), self.chunk)):
            delay = start + k * interval - loop.time()
            await asyncio.sleep(delay if delay > 0 else 0)
            yield Tokens(played[i : i + self.chunk])
        if len(tokens) > len(played):
            yield Finished(FinishReason.LENGTH)
        else:
            yield Finished(FinishReason.STOP, played[-1])
