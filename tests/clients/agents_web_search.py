"""The OpenAI Agents SDK's WebSearchTool against the server at argv[1]; prints what the run got, as JSON."""

import asyncio
import json
import sys

from agents import Agent, OpenAIResponsesModel, Runner, WebSearchTool, set_tracing_disabled
from openai import AsyncOpenAI

set_tracing_disabled(True)
client = AsyncOpenAI(base_url=sys.argv[1] + "/v1", api_key="unused")
model = OpenAIResponsesModel(model="gpt-oss", openai_client=client)
agent = Agent(name="researcher", instructions="Search when asked.", model=model, tools=[WebSearchTool()])


async def main() -> None:
    result = await Runner.run(agent, "Please search the web for zebras")
    raw = [item.raw_item for item in result.new_items]
    items = [{"raw": getattr(r, "type", None), "status": getattr(r, "status", None)} for r in raw]
    streamed = Runner.run_streamed(agent, "Search the web for zebras again")
    kinds = sorted({event.type async for event in streamed.stream_events()})
    out = {"final": result.final_output, "items": items, "streamed": streamed.final_output, "events": kinds}
    print(json.dumps(out))


asyncio.run(main())
