"""`demo`: a deterministic stand-in for a model, so a fresh clone can serve and be tried without a GPU.

It is not a model and says so in every answer. It reads the prompt's token ids as a model would and
answers in valid Harmony by rule:

- the prompt declares functions and no tool output follows the last user message → reasoning, then
  a call to a declared function (the first one the user's text names, else the first declared), with
  arguments built from the function's JSON Schema (required properties, example values);
- a tool output follows → reasoning, then an answer quoting the output;
- otherwise → reasoning, then an answer quoting the user's last message;
- the prompt ends inside a call's header (the server forced the call) → the arguments and `<|call|>`;
- the prompt ends inside the answer's header and the request carries a JSON Schema (the second step of a
  structured output) → a small valid instance of the schema (`instance`) and `<|return|>`.

Text in the prompt stays text: the quoted user message is encoded as ordinary tokens, whatever it spells.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, Sequence

from ..._tables import spec as _spec
from ...bridge.tools import recipient
from ...encoding import HarmonyEncoding
from ...models import Conversation, Message, Role
from ...stream import ParsedMessage, parse_tokens
from ..calls import FUNCTIONS_PREFIX, call_header
from ..offload import off_loop
from .base import Engine, EngineInfo, EngineOutput, EngineRequest, Finished, FinishReason, Tokens, ToolSpec
from .instance import instance

_QUOTE_LIMIT = 500  # characters of the user's message or the tool output quoted back


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
