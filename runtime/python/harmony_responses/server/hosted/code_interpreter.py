"""`code_interpreter` tools, run through gpt-oss's `python` tool in the sandbox's containers (`sandbox.py`).

A request declares `{"type": "code_interpreter", "container": {"type": "auto"} | "cntr_..."}`. The response's
session offers the model the Harmony `python` namespace; the model's message to `python` is source code, run
in the container's kernel, and the kernel's output is the python tool's message back. `auto` uses the
container of the response this one continues (`previous_response_id`), while it is live, and otherwise makes
a new one at the first call; a container id must name a live container of this server process (made by an
earlier response or by `POST /v1/containers`), else the request is a 400 naming `tools[i].container`.

The `code_interpreter_call` item carries `code`, `container_id` and, when the request's `include` asks for
`code_interpreter_call.outputs`, `outputs` (`[{"type": "logs", "logs": ...}]`; null otherwise, as OpenAI's API
does). A call the sandbox ended (wall-clock timeout, CPU, memory or process limit, a dead kernel, no free
container) is a tool error: the item is `failed` and the model reads what happened.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from ..._tables import spec as _spec
from ...bridge import RequestError, Verbatim
from ...models import ToolNamespaceConfig
from ..settings import Settings
from .base import HostedCall, HostedContext, HostedKind, HostedResult
from .sandbox import CellEnd, CellResult, Container, Sandbox, SandboxConfig, SandboxUnavailable

RECIPIENT = "python"
OUTPUTS_INCLUDE = "code_interpreter_call.outputs"
MEMORY_LIMITS = ("1g", "4g", "16g", "64g")  # OpenAI's `container.memory_limit` values
KEEP_CHAINS = 4096  # response id → container id entries kept for `auto` continuation


def _owner_key(context: HostedContext) -> str | None:
    """The digest of the API key the response was made with (a container belongs to it), when the loop says."""
    owner = getattr(context, "owner", None)
    if owner is None:
        return None
    return str(getattr(owner, "digest", owner))


class CodeInterpreterSession:
    """One response's code_interpreter tool: its container (made at the first call when `auto`)."""

    def __init__(self, backend: CodeInterpreterBackend, context: HostedContext, container_id: str | None) -> None:
        self.backend = backend
        self.context = context
        # `auto` with nothing to continue: an id reserved now (the items name it), the container made at the first
        # call, so a response that never calls python costs nothing
        self.reserved = container_id is None
        self.container_id = container_id or Sandbox.new_id()
        self.owner = _owner_key(context)
        self.response_id: str | None = None  # learnt from the first call
        self.outputs = OUTPUTS_INCLUDE in context.include

    def namespaces(self) -> Sequence[ToolNamespaceConfig]:
        return (ToolNamespaceConfig.python(),)

    def items(self) -> Sequence[Mapping[str, Any]]:
        return ()

    def claims(self, recipient: str) -> bool:
        return recipient == RECIPIENT or recipient.startswith(RECIPIENT + ".")  # `python.exec` is still python

    def pending(self) -> Sequence[HostedCall]:
        return ()

    def started(self, call: HostedCall) -> Mapping[str, Any]:
        return {"code": call.arguments, "container_id": self.container_id, "outputs": None}

    async def _container(self) -> Container:
        """The session's container: live, or made now under the id the session's items already carry."""
        sandbox = self.backend.sandbox
        found = sandbox.get(self.container_id)
        if found is not None and (found.owner is None or self.owner is None or found.owner == self.owner):
            return found
        if not self.reserved or found is not None:  # expired, never ours, or another key's: a new container
            self.container_id, self.reserved = Sandbox.new_id(), True
        return await sandbox.create(owner=self.owner, container_id=self.container_id)

    async def call(self, call: HostedCall, *, timeout: float) -> HostedResult:
        code = call.arguments
        try:
            container = await self._container()
        except SandboxUnavailable as exc:
            outcome = CellResult(CellEnd.REFUSED, error=str(exc))
            return self._result(code, self.container_id, outcome)
        self.response_id = call.response_id
        self.backend.remember(call.response_id, container.id)
        outcome = await self.backend.sandbox.execute(container, code, timeout)
        return self._result(code, container.id, outcome)

    def _result(self, code: str, container_id: str, outcome: CellResult) -> HostedResult:
        text = outcome.text()
        item: dict[str, Any] = {"code": code, "container_id": container_id, "outputs": None}
        if self.outputs:
            item["outputs"] = [{"type": "logs", "logs": text}] if text else []
        error = outcome.error if outcome.failed else None
        return HostedResult(text=text, error=error, item=item, author=RECIPIENT)

    async def aclose(self) -> None:
        if self.backend.sandbox.get(self.container_id) is not None:
            self.backend.remember(self.response_id, self.container_id)


class CodeInterpreterBackend:
    """The server's code interpreter: its sandbox, and which container each response used."""

    kind = HostedKind.CODE_INTERPRETER

    def __init__(self, config: SandboxConfig) -> None:
        self.sandbox = Sandbox(config)
        self._chains: dict[str, str] = {}  # response id → the container it used (for `auto` continuations)

    def remember(self, response_id: str | None, container_id: str) -> None:
        if response_id is None:
            return
        self._chains.pop(response_id, None)
        self._chains[response_id] = container_id
        while len(self._chains) > KEEP_CHAINS:
            self._chains.pop(next(iter(self._chains)))

    def check(self, tool: Mapping[str, Any], where: str) -> None:
        for key in tool:
            if key not in ("type", "container", "allowed_callers"):
                raise RequestError.of(_spec.REQUEST_ERROR_UNKNOWN_FIELD, f"{where}.{key}")
        callers = tool.get("allowed_callers")
        if callers is not None and (not isinstance(callers, list) or any(c != "direct" for c in callers)):
            raise _not_honoured(f"{where}.allowed_callers", callers, "only the model itself calls the python tool here")
        container = tool.get("container", {"type": "auto"})
        if isinstance(container, str):
            if self.sandbox.get(container) is None:
                raise RequestError.of(
                    _spec.REQUEST_ERROR_INVALID,
                    f"{where}.container",
                    reason=Verbatim(
                        f"no live container {container!r} on this server (expired, deleted, or never made here); "
                        'use {"type": "auto"} or POST /v1/containers'
                    ),
                )
            return
        if not isinstance(container, Mapping) or container.get("type") != "auto":
            reason = Verbatim('a container id or {"type": "auto"} is expected')
            raise RequestError.of(_spec.REQUEST_ERROR_INVALID, f"{where}.container", reason=reason)
        for key in container:
            if key not in ("type", "file_ids", "memory_limit", "network_policy"):
                raise RequestError.of(_spec.REQUEST_ERROR_UNKNOWN_FIELD, f"{where}.container.{key}")
        policy = container.get("network_policy")
        if policy is not None and (not isinstance(policy, Mapping) or policy.get("type") != "disabled"):
            why = 'a container here never reaches the network: only {"type": "disabled"}'
            raise _not_honoured(f"{where}.container.network_policy", policy, why)
        if container.get("file_ids"):
            why = "this server has no Files API to copy files into a container from"
            raise _not_honoured(f"{where}.container.file_ids", container["file_ids"], why)
        limit = container.get("memory_limit")
        if limit is not None and limit not in MEMORY_LIMITS:
            reason = Verbatim(f"one of {', '.join(MEMORY_LIMITS)}")
            raise RequestError.of(_spec.REQUEST_ERROR_INVALID, f"{where}.container.memory_limit", reason=reason)
        if limit is not None and _gib(limit) * 1024**3 > self.sandbox.config.memory_bytes:
            mib = self.sandbox.config.memory_bytes // (1024 * 1024)
            why = f"this server's containers have {mib} MiB (--code-interpreter-memory-mb)"
            raise _not_honoured(f"{where}.container.memory_limit", limit, why)

    async def open(self, tools: Sequence[Mapping[str, Any]], context: HostedContext) -> CodeInterpreterSession:
        container_id: str | None = None
        for tool in tools:  # the first tool naming a container wins; several code_interpreter tools are one python
            named = tool.get("container")
            if isinstance(named, str):
                container_id = named
                break
        if container_id is None:  # `auto`: the newest container the conversation sent back, else the chain's
            for item in reversed(list(getattr(context, "history", ()))):
                named = item.get("container_id") if isinstance(item, Mapping) else None
                if isinstance(item, Mapping) and item.get("type") == "code_interpreter_call" and isinstance(named, str):
                    container_id = named
                    break
        if container_id is None and context.previous_response_id is not None:
            container_id = self._chains.get(context.previous_response_id)
        return CodeInterpreterSession(self, context, container_id)

    async def aclose(self) -> None:
        await asyncio.shield(self.sandbox.aclose())


def _not_honoured(where: str, value: Any, why: str) -> RequestError:
    return RequestError.of(_spec.REQUEST_ERROR_NOT_HONOURED, where, value=value, why=Verbatim(why))


def _gib(limit: str) -> int:
    return int(limit.rstrip("g"))


def sandbox_config(settings: Settings) -> SandboxConfig:
    """The sandbox's limits from the server's settings (`--code-interpreter-*`, `--hosted-timeout`)."""
    return SandboxConfig(
        root=settings.code_interpreter_dir,
        python=settings.code_interpreter_python,
        timeout=settings.hosted_timeout,
        cpu_seconds=settings.code_interpreter_cpu_seconds,
        cpu_life_seconds=max(1800, 20 * settings.code_interpreter_cpu_seconds),
        memory_bytes=settings.code_interpreter_memory_mb * 1024 * 1024,
        processes=settings.code_interpreter_processes,
        output_bytes=settings.code_interpreter_output_bytes,
        idle_seconds=settings.code_interpreter_idle,
        max_containers=settings.code_interpreter_max_containers,
    )


def check_code_interpreter(settings: Settings) -> str | None:
    """With `--code-interpreter`: start and stop one sandboxed kernel, or say in one line why it cannot be."""
    if not settings.code_interpreter:
        return None
    config = sandbox_config(settings)

    async def probe() -> None:
        sandbox = Sandbox(config)
        try:
            await sandbox.check()
        finally:
            await sandbox.aclose()

    try:
        asyncio.run(probe())
    except (SandboxUnavailable, OSError) as exc:
        return f"--code-interpreter: {exc}"
    return None
