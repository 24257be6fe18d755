"""The OpenAI Agents SDK on its Responses model against the server at argv[1]; prints what each case got, as JSON."""

import asyncio
import json
import sys

from agents import Agent, OpenAIResponsesModel, Runner, function_tool, set_tracing_disabled
from openai import AsyncOpenAI

set_tracing_disabled(True)
client = AsyncOpenAI(base_url=sys.argv[1] + "/v1", api_key="unused")
model = OpenAIResponsesModel(model="gpt-oss", openai_client=client)
calls: list[str] = []


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    calls.append(city)
    return f"sunny in {city}"


agent = Agent(name="weather", instructions="Answer with the weather tool.", model=model, tools=[get_weather])


async def main() -> None:
    out: dict[str, object] = {}
    result = await Runner.run(agent, "What is the weather in Paris? Use get_weather.")
    out["run"] = {"final": result.final_output, "calls": list(calls)}
    calls.clear()
    streamed = Runner.run_streamed(agent, "Weather in Rome? Use get_weather.")
    kinds = [event.type async for event in streamed.stream_events()]
    out["streamed"] = {"final": streamed.final_output, "calls": list(calls), "events": sorted(set(kinds))}
    calls.clear()
    chained = await Runner.run(agent, "Weather in Oslo? Use get_weather.", previous_response_id=result.last_response_id)
    out["previous"] = {"final": chained.final_output, "calls": list(calls), "first": result.last_response_id}
    print(json.dumps(out))


asyncio.run(main())
