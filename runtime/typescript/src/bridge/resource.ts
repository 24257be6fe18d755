/** The `ResponseResource` of a response: its state, its output, and the request's settings echoed back. */

import type { CreateResponseBody, JsonSchemaResponseFormatParam, ResponseResource, Usage } from "#types";

import { type JsonData, type JsonObject } from "../json.js";
import type { Recovered } from "../stream/events.js";
import { spec } from "../tables.js";
import { make, modelOf } from "./schema.js";
import { functionTools } from "./tools.js";

/** One repair as the response lists it in its vendor-prefixed field. */
export type RepairRecord = Pick<Recovered, "rule" | "detail" | "position" | "text">;

function toolChoice(body: CreateResponseBody): JsonData {
  const choice = body.tool_choice ?? "auto";
  const echoed = (ref: { readonly name: string }): JsonObject => make("FunctionToolChoice", { name: ref.name });
  if (typeof choice === "object" && modelOf(choice) === "SpecificFunctionParam" && "name" in choice) return echoed(choice);
  if (typeof choice === "object" && "tools" in choice) {
    return make("AllowedToolChoice", { tools: choice.tools.map(echoed), mode: choice.mode ?? "auto" });
  }
  return choice as JsonData;
}

function textField(body: CreateResponseBody): JsonObject {
  const fmt = body.text?.format ?? null;
  let echoed: JsonObject = make("TextResponseFormat", {});
  if (fmt !== null && modelOf(fmt) === "JsonSchemaResponseFormatParam") {
    // The spec's ResponseResource echoes no schema (`type: null`); a format without a name echoes `name: ""`.
    const { name, description, strict } = fmt as JsonSchemaResponseFormatParam;
    echoed = make("JsonSchemaResponseFormat", { name: name ?? "", description: description ?? null, schema: null, strict: !!strict });
  }
  const verbosity = body.text?.verbosity ?? null;
  return make("TextField", { format: echoed, ...(verbosity !== null && { verbosity }) }); // an absent verbosity stays absent
}

export function usage(inputTokens: number, outputTokens: number, reasoningTokens: number, cachedTokens = 0): Usage {
  return make("Usage", {
    input_tokens: inputTokens,
    input_tokens_details: { cached_tokens: cachedTokens },
    output_tokens: outputTokens,
    output_tokens_details: { reasoning_tokens: reasoningTokens },
    total_tokens: inputTokens + outputTokens,
  });
}

/** What a snapshot holds besides the request's settings. */
export interface SnapshotState {
  readonly responseId: string;
  readonly createdAt: number;
  readonly model: string;
  readonly status: string;
  readonly output: readonly JsonObject[];
  readonly usage?: Usage | null;
  readonly error?: JsonObject | null;
  readonly incompleteReason?: string | null;
  readonly completedAt?: number | null;
  readonly repairs?: readonly RepairRecord[] | null;
}

/**
 * A full `ResponseResource` (all 31 keys) echoing the request's settings. `repairs`, when there are any, go into
 * a vendor-prefixed field (`RESPONSE_REPAIRS_FIELD` of the spec): what lenient parsing changed in the model's
 * output, so that no repair is silent.
 */
export function responseSnapshot(body: CreateResponseBody | null, state: SnapshotState): ResponseResource {
  const b: CreateResponseBody = body ?? {};
  const tools = functionTools(b).map(({ name, description, parameters, strict }) =>
    make("FunctionTool", { name, description: description ?? null, parameters: (parameters ?? null) as JsonData, strict: strict ?? null }),
  );
  const out: JsonObject = {
    id: state.responseId,
    created_at: state.createdAt,
    completed_at: state.completedAt ?? null,
    status: state.status,
    incomplete_details: state.incompleteReason ? make("IncompleteDetails", { reason: state.incompleteReason }) : null,
    model: b.model || state.model,
    previous_response_id: null,
    instructions: b.instructions ?? null,
    output: [...state.output],
    error: state.error ?? null,
    tools,
    tool_choice: toolChoice(b),
    truncation: b.truncation || "disabled",
    parallel_tool_calls: b.parallel_tool_calls ?? true,
    text: textField(b),
    top_p: b.top_p ?? 1,
    presence_penalty: b.presence_penalty || 0,
    frequency_penalty: b.frequency_penalty || 0,
    top_logprobs: b.top_logprobs || 0,
    temperature: b.temperature ?? 1,
    reasoning: b.reasoning ? make("Reasoning", { effort: b.reasoning.effort ?? null, summary: b.reasoning.summary ?? null }) : null,
    usage: (state.usage ?? null) as JsonData,
    max_output_tokens: b.max_output_tokens ?? null,
    max_tool_calls: b.max_tool_calls ?? null,
    store: false,
    background: false,
    service_tier: "default",
    metadata: (b.metadata ?? {}) as JsonData,
    safety_identifier: b.safety_identifier ?? null,
    prompt_cache_key: b.prompt_cache_key ?? null,
  };
  if (state.repairs && state.repairs.length > 0) out[spec.RESPONSE_REPAIRS_FIELD] = state.repairs.map((r) => ({ ...r }));
  const given = b as unknown as JsonObject;
  const labels = Object.keys(spec.LABEL_FIELDS).filter((key) => given[key] !== undefined && !(key in out));
  if (labels.length > 0) out[spec.RESPONSE_LABELS_FIELD] = Object.fromEntries(labels.map((key) => [key, given[key] as JsonData]));
  const unavailable = given[spec.RESPONSE_UNAVAILABLE_TOOLS_FIELD];
  if (Array.isArray(unavailable) && unavailable.length > 0) out[spec.RESPONSE_UNAVAILABLE_TOOLS_FIELD] = unavailable;
  return make("ResponseResource", out) as unknown as ResponseResource;
}
