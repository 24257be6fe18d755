// The Vercel AI SDK's OpenAI Responses provider against the server at argv[2]; prints each case's result as JSON
// ({ok, text, toolResults} or {ok: false, error}).
import { generateText, Output, stepCountIs, streamText, tool } from "ai";
import { createOpenAI } from "@ai-sdk/openai";
import { z } from "zod";

const openai = createOpenAI({ baseURL: process.argv[2] + "/v1", apiKey: "unused" });
const model = openai.responses("gpt-oss");
const weather = tool({
  description: "The weather in a city.",
  inputSchema: z.object({ city: z.string() }),
  execute: async ({ city }) => `sunny in ${city}`,
});

async function attempt(fn) {
  try {
    return { ok: true, ...(await fn()) };
  } catch (e) {
    return { ok: false, error: String(e?.message ?? e) + " " + String(e?.responseBody ?? "") };
  }
}

globalThis.AI_SDK_LOG_WARNINGS = false;
const results = {};
results.generateText = await attempt(async () => ({ text: (await generateText({ model, prompt: "Say hello." })).text }));
results.streamText = await attempt(async () => {
  const s = streamText({ model, system: "Be brief.", prompt: "Say hello in a stream." });
  let text = "";
  for await (const delta of s.textStream) text += delta;
  return { text };
});
const loop = (providerOptions) => async () => {
  const r = await generateText({ model, tools: { weather }, stopWhen: stepCountIs(3), prompt: "Weather in Paris? Use weather.", providerOptions });
  return { text: r.text, steps: r.steps.length, toolResults: r.steps.flatMap((s) => s.toolResults.map((t) => t.output)) };
};
results.toolLoop = await attempt(loop(undefined));
results.toolLoopStoreFalse = await attempt(loop({ openai: { store: false } }));
results.outputObject = await attempt(async () => {
  const r = await generateText({ model, output: Output.object({ schema: z.object({ city: z.string(), sunny: z.boolean() }) }), prompt: "A city and whether it is sunny, as JSON." });
  return { object: r.output };
});
console.log(JSON.stringify(results));
