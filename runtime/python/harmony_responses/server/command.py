"""`harmony-responses serve`: the command line of the server (uvicorn is imported only when it runs).

Flags override the `HARMONY_RESPONSES_*` environment variables (see `settings`). The listening socket
is bound here, before uvicorn starts, so `--port 0` works and the real address is printed on one line
(`harmony-responses serve: listening on http://HOST:PORT`) that scripts and tests can wait for.
"""

from __future__ import annotations

import argparse
import logging
import os
import socket
import sys
from typing import Any

from .banner import startup_lines
from .engines.spec import ENGINES_HELP
from .hosted.flags import add_hosted_arguments, hosted_overrides
from .settings import HostedTools, MediaPolicy, ReasoningEvents, Settings, SettingsError

log = logging.getLogger("harmony_responses.server")

_LOG_LEVELS = [name.lower() for name, _ in sorted(logging.getLevelNamesMapping().items(), key=lambda kv: -kv[1])][:-1]


def add_serve_parser(sub: Any) -> None:
    """Register `serve` on the CLI's subparsers."""
    p = sub.add_parser(
        "serve",
        help="serve Open Responses and Chat Completions in front of an inference engine",
        description="Serve /v1/responses and /v1/chat/completions for gpt-oss running in an inference engine. "
        "Every flag also reads HARMONY_RESPONSES_<FLAG> (e.g. HARMONY_RESPONSES_ENGINE); flags win.",
        epilog=ENGINES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--host", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, help="port (default 8000; 0 picks a free one)")
    p.add_argument(
        "--engine",
        help="the engine: demo, replay:FILE, vllm:URL, sglang:URL, sglang-completions:URL, llamacpp:URL, "
        "ollama:URL (default demo, a deterministic stand-in for a model; the list below)",
    )
    p.add_argument("--model", help="the model name served and listed by /v1/models (default gpt-oss)")
    p.add_argument(
        "--api-key",
        action="append",
        dest="api_keys",
        help="accept this key (repeatable); none: no auth. A flag's value shows in `ps` to every user of the "
        "machine: HARMONY_RESPONSES_API_KEYS=KEY1,KEY2 in the environment avoids that",
    )
    p.add_argument("--workers", type=int, help="worker processes (default 1)")
    p.add_argument("--media", choices=[m.value for m in MediaPolicy], help="image/file inputs (default reject)")
    p.add_argument(
        "--reasoning-events",
        choices=[r.value for r in ReasoningEvents],
        help="raw reasoning event names: response.reasoning.* (spec, default) or response.reasoning_text.* (openai)",
    )
    p.add_argument("--max-concurrency", type=int, help="engine requests in flight per worker before 429 (512)")
    p.add_argument("--max-body-bytes", type=int, help="largest request body (8 MiB)")
    p.add_argument("--engine-timeout", type=float, help="seconds to connect, start and continue (60)")
    p.add_argument("--default-max-output-tokens", type=int, help="engine budget when a request sets none (8192)")
    p.add_argument("--log-level", choices=_LOG_LEVELS, help="default info")
    p.add_argument(
        "--store",
        help="where responses are kept: sqlite:///PATH, postgresql://USER@HOST/DB or memory "
        "(default: a SQLite file under the user's data folder)",
    )
    p.add_argument("--context-window", type=int, help="the model's context window in tokens (131072, gpt-oss's)")
    p.add_argument(
        "--compaction-key", help="signs compaction items (default: a random key kept in the store, shared by its users)"
    )
    p.add_argument(
        "--reasoning-key",
        help="encrypts reasoning items' encrypted_content (default: a random key kept in the store)",
    )
    p.add_argument(
        "--store-recover-interval", type=float, help="seconds between sweeps for responses of dead processes (30)"
    )
    p.add_argument(
        "--shutdown-timeout",
        type=float,
        help="seconds live responses may finish after SIGTERM/SIGINT before they are ended as failed (30)",
    )
    p.add_argument("--max-head-bytes", type=int, help="largest request line and headers; more gets 431 (64 KiB)")
    p.add_argument("--receive-timeout", type=float, help="seconds to receive a request's head and body; then 408 (30)")
    p.add_argument("--idle-timeout", type=float, help="seconds an idle connection is kept open (5)")
    p.add_argument("--max-connections", type=int, help="open connections per worker; one more gets 503 (4096)")
    p.add_argument(
        "--hosted-tools",
        choices=[h.value for h in HostedTools],
        help="declared tools the server cannot run (web_search, custom, ...): omit them from the prompt and list "
        "them in the response's harmony:unavailable_tools (default), or reject the request with a 400",
    )
    add_hosted_arguments(p)
    p.set_defaults(func=serve, file=None)


def settings_from_args(args: argparse.Namespace, environ: dict[str, str]) -> Settings:
    overrides = {
        "host": args.host,
        "port": args.port,
        "engine": args.engine,
        "model": args.model,
        "api_keys": tuple(args.api_keys) if args.api_keys else None,
        "workers": args.workers,
        "media": MediaPolicy(args.media) if args.media else None,
        "reasoning_events": ReasoningEvents(args.reasoning_events) if args.reasoning_events else None,
        "max_concurrency": args.max_concurrency,
        "max_body_bytes": args.max_body_bytes,
        "engine_timeout": args.engine_timeout,
        "default_max_output_tokens": args.default_max_output_tokens,
        "log_level": args.log_level,
        "store": args.store,
        "context_window": args.context_window,
        "compaction_key": args.compaction_key,
        "reasoning_key": args.reasoning_key,
        "store_recover_interval": args.store_recover_interval,
        "shutdown_timeout": args.shutdown_timeout,
        "max_head_bytes": args.max_head_bytes,
        "receive_timeout": args.receive_timeout,
        "idle_timeout": args.idle_timeout,
        "max_connections": args.max_connections,
        "hosted_tools": HostedTools(args.hosted_tools) if args.hosted_tools else None,
        **hosted_overrides(args),
    }
    return Settings.from_env(environ, **overrides)


def startup_warnings(settings: Settings) -> list[str]:
    """What the operator should hear before the server starts."""
    if settings.listens_beyond_loopback() and not settings.api_keys:
        return [
            f"listening on {settings.host} without API keys: anyone who can reach this address can use the engine "
            "(set --api-key or HARMONY_RESPONSES_API_KEYS)"
        ]
    return []


def check_engine(settings: Settings) -> str | None:
    """Build the engine once (a bad spec, a recordings file missing or unreadable), or say why it cannot be."""
    import asyncio

    from .._tables import spec as _spec
    from ..encoding import load_harmony_encoding
    from .engines.spec import EngineSpecError, build_engine, parse_engine_spec

    try:
        if parse_engine_spec(settings.engine).kind != "replay":
            return None  # nothing else is read before serving (an engine that does not answer is a 502, /ready 503)
        engine = build_engine(
            settings.engine,
            load_harmony_encoding(_spec.ENCODING_NAME),
            model=settings.model,
            timeout=settings.engine_timeout,
            max_connections=1,
        )
    except EngineSpecError as exc:
        return str(exc)
    except OSError as exc:
        return f"--engine {settings.engine!r}: {exc.strerror or exc}"
    asyncio.run(engine.aclose())
    return None


def check_store(settings: Settings) -> str | None:
    """Open the store once before any worker starts (creating and migrating it), or say why it cannot be used."""
    from ..store import MemoryStore, StoreError, open_store

    url = settings.store_url()
    try:
        store = open_store(url)
    except StoreError as exc:
        return f"cannot open the response store {url!r}: {exc}"
    memory = isinstance(store, MemoryStore)
    store.close()
    if memory and settings.workers > 1:
        return "--store memory keeps responses inside one process: with --workers N use sqlite:///PATH or postgresql://"
    return None


def _bind(settings: Settings) -> socket.socket:
    family = socket.AF_INET6 if ":" in settings.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((settings.host, settings.port))
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def serve(args: argparse.Namespace) -> int:
    """Run the server until interrupted."""
    try:
        settings = settings_from_args(args, dict(os.environ))
    except SettingsError as exc:
        print(f"harmony-responses serve: {exc}", file=sys.stderr)
        return 2
    try:
        from .serving import run_worker, supervise
    except ImportError as exc:
        print(
            f"harmony-responses serve: {exc.name} is missing; install the server extra: "
            "pip install 'harmony-responses[server]'",
            file=sys.stderr,
        )
        return 2
    problem = check_engine(settings)
    engine_model, note = settings.model, None
    if problem is None:
        from .engines.discover import DiscoveryError, resolve_engine

        try:
            engine, engine_model, note = resolve_engine(settings.engine, settings.model)
        except DiscoveryError as exc:
            problem = str(exc)
        else:
            settings = settings.replace(engine=engine)
            problem = check_store(settings)
    if problem is None:
        from .hosted.code_interpreter import check_code_interpreter

        problem = check_code_interpreter(settings)
    if problem is not None:
        one_line = " ".join(problem.split())  # a driver's message may span lines
        print(f"harmony-responses serve: {one_line}", file=sys.stderr)
        return 2
    logging.basicConfig(level=settings.log_level.upper(), format="%(levelname)s: %(name)s: %(message)s")
    for warning in startup_warnings(settings):
        log.warning("%s", warning)
    os.environ.update(settings.to_env())  # the workers (and the factory) read their settings from here
    try:
        sock = _bind(settings)
    except OSError as exc:
        where = f"{settings.host}:{settings.port}"
        print(f"harmony-responses serve: cannot listen on {where}: {exc.strerror}", file=sys.stderr)
        return 2
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    print(f"harmony-responses serve: listening on http://{shown}:{port} (engine {settings.engine})")
    for line in startup_lines(settings, f"http://{shown}:{port}", engine_model, note):
        print(line)
    sys.stdout.flush()
    if settings.workers > 1:
        supervise(settings, sock)
    else:
        run_worker(sock)
    return 0
