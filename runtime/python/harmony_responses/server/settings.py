"""The server's settings: defaults, environment variables (`HARMONY_RESPONSES_*`) and their validation.

Every setting has one environment variable, named `HARMONY_RESPONSES_` + the field name in capitals
(`HARMONY_RESPONSES_ENGINE=vllm:http://127.0.0.1:8001`); a command-line flag wins over it. API keys
are comma-separated in `HARMONY_RESPONSES_API_KEYS`. Worker processes receive their settings through
the same variables (`to_env`), so what one process reads every worker reads.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, fields
from enum import Enum
from typing import Any

from ..bridge.request import HostedTools
from ..store import default_store_url

ENV_PREFIX = "HARMONY_RESPONSES_"


class MediaPolicy(Enum):
    """What happens to image and file inputs, which gpt-oss cannot read."""

    REJECT = "reject"  # the bridge's 400 naming the content part
    PLACEHOLDER = "placeholder"  # a short text marker stands in for the part


class ReasoningEvents(Enum):
    """The names of raw reasoning events on the wire."""

    SPEC = "spec"  # response.reasoning.delta / .done (Open Responses)
    OPENAI = "openai"  # response.reasoning_text.delta / .done (OpenAI's hosted API)


__all__ = ["HostedTools", "MediaPolicy", "ReasoningEvents", "Settings", "SettingsError"]


class SettingsError(ValueError):
    """A setting with a value the server cannot use; names the variable or flag."""


@dataclass(frozen=True)
class Settings:
    """Everything `harmony-responses serve` can be told."""

    host: str = "127.0.0.1"
    port: int = 8000
    engine: str = "demo"
    model: str = "gpt-oss"
    api_keys: tuple[str, ...] = ()
    workers: int = 1
    media: MediaPolicy = MediaPolicy.REJECT
    reasoning_events: ReasoningEvents = ReasoningEvents.SPEC
    max_concurrency: int = 512  # engine-backed requests in flight per worker; one more gets 429
    max_body_bytes: int = 8 * 1024 * 1024  # larger bodies get 413 before they are read
    max_json_depth: int = 64  # deeper bodies get 400 before they are parsed
    engine_timeout: float = 60.0  # seconds: to connect, for the first output, and between outputs
    default_max_output_tokens: int = 8192  # the engine budget when a request sets none
    log_level: str = "info"
    store: str = ""  # the response store's URL; "" is the embedded default (a SQLite file, see `store_url`)
    context_window: int = 131072  # the served model's context window in tokens (gpt-oss's)
    compaction_key: str = ""  # signs compaction items; "" uses a random key kept in the store
    reasoning_key: str = ""  # encrypts reasoning items' encrypted_content; "" uses a random key kept in the store
    store_recover_interval: float = 30.0  # seconds between sweeps for responses whose server process died
    shutdown_timeout: float = 30.0  # seconds live responses may run after SIGTERM/SIGINT before they are ended
    max_head_bytes: int = 64 * 1024  # request line and headers; more gets 431 and the connection closed
    receive_timeout: float = 30.0  # seconds from a request's first byte to the end of its body; then 408
    idle_timeout: float = 5.0  # seconds a connection may wait for its first (or next) request before it is closed
    max_connections: int = 4096  # open connections per worker; one more gets 503 instead of a failed accept()
    hosted_tools: HostedTools = HostedTools.OMIT  # declared tools the server cannot run: left out, or a 400
    # Hosted tools (server/hosted/, docs/hosted-tools.md): each backend is off unless configured.
    web_search: str = ""  # a SearXNG-compatible search API's base URL (`GET /search?q=...&format=json`); "" is off
    mcp: bool = False  # run `mcp` tools: connect to the MCP servers requests declare (hosted/mcp.py)
    mcp_max_output_bytes: int = 64 * 1024  # the most of one MCP tool result the model reads (the rest is cut)
    mcp_max_tools: int = 128  # the most tools one MCP server may declare to the model
    hosted_allow: tuple[str, ...] = ()  # hosts, addresses or CIDRs hosted tools may reach beyond public addresses
    hosted_deny: tuple[str, ...] = ()  # hosts, addresses or CIDRs hosted tools may never reach (wins over allow)
    hosted_timeout: float = 30.0  # seconds per hosted tool call (a fetch, a search, a kernel run, an MCP call)
    hosted_max_calls: int = 16  # hosted tool calls one response may make (the tool budget; `max_tool_calls` lowers it)
    hosted_max_bytes: int = 4 * 1024 * 1024  # the largest body one fetch reads (a page, a search answer)
    code_interpreter: bool = False  # run code_interpreter tools (the python tool) in bubblewrap sandboxes
    code_interpreter_cpu_seconds: int = 30  # CPU seconds per call (the wall clock per call is hosted_timeout)
    code_interpreter_memory_mb: int = 1024  # address space of a container's kernel and of each of its processes
    code_interpreter_processes: int = 64  # processes and threads of one container (a fork bomb stops there)
    code_interpreter_output_bytes: int = 65536  # stdout and stderr of one call are each cut there
    code_interpreter_idle: float = 1200.0  # seconds an unused container lives before it is reaped
    code_interpreter_max_containers: int = 16  # live containers per server process
    code_interpreter_dir: str = ""  # folder holding the containers' files; "" is a new temporary folder
    code_interpreter_python: str = ""  # the Python run inside the sandbox; "" is the server's own

    def validate(self) -> Settings:
        """Self, or `SettingsError` naming the first bad value."""
        positive = (
            "workers",
            "max_concurrency",
            "max_body_bytes",
            "max_json_depth",
            "default_max_output_tokens",
            "context_window",
            "max_head_bytes",
            "max_connections",
            "hosted_max_calls",
            "hosted_max_bytes",
            "code_interpreter_cpu_seconds",
            "code_interpreter_memory_mb",
            "code_interpreter_processes",
            "code_interpreter_output_bytes",
            "code_interpreter_max_containers",
            "mcp_max_output_bytes",
            "mcp_max_tools",
        )
        for name in positive:
            if getattr(self, name) < 1:
                raise SettingsError(f"{name} must be at least 1, got {getattr(self, name)}")
        if not 0 <= self.port <= 65535:
            raise SettingsError(f"port must be 0..65535, got {self.port}")
        if self.engine_timeout <= 0:
            raise SettingsError(f"engine_timeout must be positive, got {self.engine_timeout}")
        for seconds in (
            "store_recover_interval",
            "receive_timeout",
            "idle_timeout",
            "hosted_timeout",
            "code_interpreter_idle",
        ):
            if getattr(self, seconds) <= 0:
                raise SettingsError(f"{seconds} must be positive, got {getattr(self, seconds)}")
        if self.shutdown_timeout < 0:
            raise SettingsError(f"shutdown_timeout must be at least 0, got {self.shutdown_timeout}")
        from .hosted.policy import PolicyError, parse_rule  # httpx is imported only when the server runs

        for name in ("hosted_allow", "hosted_deny"):
            for entry in getattr(self, name):
                try:
                    parse_rule(entry)
                except PolicyError as exc:
                    raise SettingsError(f"{name}: {exc}") from None
        if self.web_search and not self.web_search.startswith(("http://", "https://")):
            raise SettingsError(f"web_search must be an http:// or https:// URL, got {self.web_search!r}")
        if self.code_interpreter and self.workers > 1:
            raise SettingsError(
                "code_interpreter keeps each container's kernel in one server process: it needs workers = 1"
            )
        if self.mcp and importlib.util.find_spec("mcp") is None:
            raise SettingsError("mcp: the MCP SDK is not installed (pip install 'harmony-responses[mcp]')")
        if any(not key for key in self.api_keys):
            raise SettingsError("api_keys: an empty key would accept an empty Authorization header")
        return self

    def store_url(self) -> str:
        """The response store's URL: `store`, or the embedded default SQLite file under the user's data folder."""
        return self.store or default_store_url()

    def listens_beyond_loopback(self) -> bool:
        """True unless `host` is a loopback address or `localhost`."""
        if self.host == "localhost":
            return False
        try:
            return not ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return True  # a host name other than localhost may resolve anywhere

    @classmethod
    def from_env(cls, environ: Mapping[str, str], **overrides: Any) -> Settings:
        """Defaults, then `HARMONY_RESPONSES_*` variables, then `overrides` (the command line; None = not given)."""
        values: dict[str, Any] = {}
        for f in fields(cls):
            raw = environ.get(ENV_PREFIX + f.name.upper())
            if raw is not None and raw != "":
                values[f.name] = _convert(f.name, f.type, raw, ENV_PREFIX + f.name.upper())
        for name, value in overrides.items():
            if value is not None:
                values[name] = value
        return cls(**values).validate()

    def to_env(self) -> dict[str, str]:
        """The variables that make `from_env` return these settings."""
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, Enum):
                value = value.value
            elif isinstance(value, tuple):
                value = ",".join(value)
            out[ENV_PREFIX + f.name.upper()] = str(value)
        return out

    def replace(self, **changes: Any) -> Settings:
        return dataclasses.replace(self, **changes).validate()


def _convert(name: str, annotation: Any, raw: str, where: str) -> Any:
    kind = str(annotation)
    try:
        if kind == "int":
            return int(raw)
        if kind == "bool":
            lowered = raw.strip().lower()
            if lowered not in ("1", "true", "yes", "on", "0", "false", "no", "off"):
                raise ValueError(raw)
            return lowered in ("1", "true", "yes", "on")
        if kind == "float":
            return float(raw)
        if kind == "MediaPolicy":
            return MediaPolicy(raw)
        if kind == "ReasoningEvents":
            return ReasoningEvents(raw)
        if kind == "HostedTools":
            return HostedTools(raw)
        if kind == "tuple[str, ...]":
            return tuple(part.strip() for part in raw.split(",") if part.strip())
        if kind == "bool":
            return {"1": True, "true": True, "yes": True, "on": True, "0": False, "false": False, "no": False,
                    "off": False}[raw.strip().lower()]  # fmt: skip
    except (ValueError, KeyError):
        raise SettingsError(f"{where}: {raw!r} is not a valid {name}") from None
    return raw
