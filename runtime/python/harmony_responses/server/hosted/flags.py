"""The `serve` flags of the hosted tools (each is also `HARMONY_RESPONSES_<NAME>`, see `server.settings`).

Kept here, apart from `server.command`, so each hosted backend adds its own flags beside the others'.
"""

from __future__ import annotations

import argparse
from typing import Any


def add_hosted_arguments(p: argparse.ArgumentParser) -> None:
    """The hosted tools' flags, on `serve`'s parser."""
    g = p.add_argument_group("hosted tools", "tools the server runs itself; each is off unless configured")
    g.add_argument(
        "--web-search",
        metavar="URL",
        help="run web_search tools (gpt-oss's browser tool) against this SearXNG-compatible search API "
        "(GET URL/search?q=...&format=json); off by default",
    )
    g.add_argument(
        "--mcp",
        action="store_true",
        default=None,
        help="run mcp tools: connect to the remote MCP servers requests declare (server_url), through the "
        "--hosted-allow/--hosted-deny policy; off by default",
    )
    g.add_argument("--mcp-max-output-bytes", type=int, help="the most of one MCP tool result the model reads (64 KiB)")
    g.add_argument("--mcp-max-tools", type=int, help="the most tools one MCP server may declare to the model (128)")
    g.add_argument(
        "--hosted-allow",
        action="append",
        metavar="HOST|CIDR",
        help="let hosted tools reach this host name, address or range (repeatable); by default they reach public "
        "addresses only: never loopback, private or link-local ones",
    )
    g.add_argument(
        "--hosted-deny",
        action="append",
        metavar="HOST|CIDR",
        help="never let hosted tools reach this host name, address or range (repeatable; wins over --hosted-allow)",
    )
    g.add_argument("--hosted-timeout", type=float, help="seconds per hosted tool call (30)")
    g.add_argument("--hosted-max-calls", type=int, help="hosted tool calls one response may make (16)")
    g.add_argument("--hosted-max-bytes", type=int, help="the largest body one hosted fetch reads (4 MiB)")
    g.add_argument(
        "--code-interpreter",
        action="store_true",
        default=None,
        help="run code_interpreter tools (gpt-oss's python tool): a stateful kernel per container, in a bubblewrap "
        "sandbox with no network and a read-only system (needs bwrap: apt-get install bubblewrap); off by default",
    )
    g.add_argument("--code-interpreter-cpu-seconds", type=int, metavar="N", help="CPU seconds per python call (30)")
    g.add_argument("--code-interpreter-memory-mb", type=int, metavar="MB", help="memory of a container (1024)")
    g.add_argument("--code-interpreter-processes", type=int, metavar="N", help="processes of a container (64)")
    g.add_argument("--code-interpreter-output-bytes", type=int, metavar="N", help="stdout/stderr per call (64 KiB)")
    g.add_argument("--code-interpreter-idle", type=float, metavar="SECONDS", help="idle container lifetime (1200)")
    g.add_argument("--code-interpreter-max-containers", type=int, metavar="N", help="live containers (16)")
    g.add_argument("--code-interpreter-dir", metavar="DIR", help="where the containers' files live (a temp folder)")
    g.add_argument("--code-interpreter-python", metavar="PATH", help="the Python run in the sandbox (the server's)")


def hosted_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The settings the hosted flags give (None: not given)."""
    return {
        "web_search": args.web_search,
        "mcp": args.mcp,
        "mcp_max_output_bytes": args.mcp_max_output_bytes,
        "mcp_max_tools": args.mcp_max_tools,
        "hosted_allow": tuple(args.hosted_allow) if args.hosted_allow else None,
        "hosted_deny": tuple(args.hosted_deny) if args.hosted_deny else None,
        "hosted_timeout": args.hosted_timeout,
        "hosted_max_calls": args.hosted_max_calls,
        "hosted_max_bytes": args.hosted_max_bytes,
        "code_interpreter": args.code_interpreter,
        "code_interpreter_cpu_seconds": args.code_interpreter_cpu_seconds,
        "code_interpreter_memory_mb": args.code_interpreter_memory_mb,
        "code_interpreter_processes": args.code_interpreter_processes,
        "code_interpreter_output_bytes": args.code_interpreter_output_bytes,
        "code_interpreter_idle": args.code_interpreter_idle,
        "code_interpreter_max_containers": args.code_interpreter_max_containers,
        "code_interpreter_dir": args.code_interpreter_dir,
        "code_interpreter_python": args.code_interpreter_python,
    }
