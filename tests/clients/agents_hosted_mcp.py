"""The OpenAI Agents SDK's HostedMCPTool against the server at argv[1], the MCP server at argv[2] (token argv[3]).

Two runs: one whose MCP tool needs no approval, and one that needs it, approved by `on_approval_request`. Prints
what each run got, as JSON: the final output and the kinds of the run's new items.
"""

import asyncio
import json
import sys

from agents import Agent, HostedMCPTool, OpenAIResponsesModel, Runner, set_tracing_disabled
from openai import AsyncOpenAI

set_tracing_disabled(True)
client = AsyncOpenAI(base_url=sys.argv[1] + "/v1", api_key="unused")
model = OpenAIResponsesModel(model="gpt-oss", openai_client=client)
mcp_url, token = sys.argv[2], sys.argv[3]
approvals: list[str] = []


def approve(request: object) -> dict[str, object]:
    item = getattr(request, "data", None)
    approvals.append(str(getattr(item, "name", "?")))
    return {"approve": True}


def agent(require_approval: str, with_hook: bool) -> Agent:
    tool = HostedMCPTool(
        tool_config={
            "type": "mcp",
            "server_label": "notes",
            "server_url": mcp_url,
            "authorization": token,
            "headers": {"X-Tenant": "agents"},
            "allowed_tools": ["whoami", "delete_note"],
            "require_approval": require_approval,
        },
        on_approval_request=approve if with_hook else None,
    )
    return Agent(name="notes", instructions="Use the notes tools.", model=model, tools=[tool])


def kinds(result: object) -> list[str]:
    out = []
    for item in getattr(result, "new_items", []):
        raw = getattr(item, "raw_item", None)
        kind = getattr(raw, "type", None) or (raw.get("type") if isinstance(raw, dict) else None)
        out.append(f"{type(item).__name__}:{kind}")
    return out


async def main() -> None:
    out: dict[str, object] = {}
    result = await Runner.run(agent("never", False), "Who am I? Use notes.whoami.")
    out["never"] = {"final": result.final_output, "items": kinds(result)}
    approved = await Runner.run(agent("always", True), "Delete the note 'old'. Use notes.delete_note.")
    out["approved"] = {"final": approved.final_output, "items": kinds(approved), "approvals": approvals}
    print(json.dumps(out))


asyncio.run(main())
