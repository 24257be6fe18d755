// The page at `/` of harmony-responses serve: a playground for /v1/responses (streamed) and an inspector that
// runs the server's bridge on a raw completion (POST /v1/harmony/inspect). Plain browser JavaScript, no build
// step; every text from the server is put in the page with textContent, never as HTML.
"use strict";

const WEATHER_TOOL = {
  type: "function",
  name: "get_weather",
  description: "The current weather in a city.",
  parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  strict: true,
};

const GLITCHY_COMPLETION =
  "<|channel|>analysis<|message|>The user wants the weather in Paris, so I call get_weather.<|end|>" +
  "assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>" +
  '{"city": "Paris"}<|call|>';

const $ = (id) => document.getElementById(id);

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function headers() {
  const h = { "Content-Type": "application/json" };
  const key = $("api-key").value.trim();
  if (key) h["Authorization"] = `Bearer ${key}`;
  return h;
}

function errorText(body, status) {
  const e = body && body.error;
  if (!e) return `HTTP ${status}`;
  return `${status} ${e.code || e.type}: ${e.message}${e.param ? ` (${e.param})` : ""}`;
}

// -- tabs ------------------------------------------------------------------------------------------------

function showTab(name) {
  for (const tab of ["playground", "inspector"]) {
    $(tab).hidden = tab !== name;
    $(`tab-${tab}`).classList.toggle("active", tab === name);
  }
  history.replaceState(null, "", name === "playground" ? "#" : `#${name}`);
}

// -- SSE -------------------------------------------------------------------------------------------------

async function* sseEvents(response) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true }).replace(/\r\n?/g, "\n");
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      const data = block
        .split("\n")
        .filter((line) => line.startsWith("data:"))
        .map((line) => line.slice(5).replace(/^ /, ""))
        .join("\n");
      if (data && data !== "[DONE]") yield JSON.parse(data);
    }
  }
}

// -- playground ------------------------------------------------------------------------------------------

let previousId = null;

function addTurn(kind, label) {
  const turn = el("div", `turn ${kind}`);
  turn.append(el("div", "who", label));
  $("conversation").append(turn);
  turn.scrollIntoView({ block: "end" });
  return turn;
}

class TurnView {
  constructor() {
    this.turn = addTurn("assistant", "gpt-oss");
    this.items = new Map(); // output index → its element and text
    this.status = el("div", "status", "streaming…");
    this.turn.append(this.status);
  }

  slot(index, make) {
    if (!this.items.has(index)) {
      const made = make();
      this.turn.insertBefore(made.node, this.status);
      this.items.set(index, made);
    }
    return this.items.get(index);
  }

  reasoning(index) {
    return this.slot(index, () => {
      const node = el("details", "reasoning");
      const summary = el("summary", "", "reasoning");
      const text = el("div", "answer");
      node.append(summary, text);
      return { node, text, summary, chars: 0 };
    });
  }

  answer(index) {
    return this.slot(index, () => {
      const node = el("div", "answer");
      return { node, text: node };
    });
  }

  call(index, item) {
    return this.slot(index, () => {
      const node = el("div", "call");
      node.append(el("span", "name", item.name || item.type), document.createTextNode("("));
      const text = el("span", "args");
      node.append(text, document.createTextNode(")"));
      return { node, text, item };
    });
  }

  handle(event) {
    const t = event.type;
    if (t === "response.output_item.added") {
      const item = event.item;
      if (item.type === "reasoning") this.reasoning(event.output_index);
      else if (item.type === "message") this.answer(event.output_index);
      else this.call(event.output_index, item);
    } else if (t === "response.reasoning.delta" || t === "response.reasoning_text.delta") {
      const slot = this.reasoning(event.output_index);
      slot.text.textContent += event.delta;
      slot.chars += event.delta.length;
      slot.summary.textContent = `reasoning (${slot.chars} characters)`;
    } else if (t === "response.output_text.delta") {
      this.answer(event.output_index).text.textContent += event.delta;
    } else if (t === "response.function_call_arguments.delta") {
      this.call(event.output_index, {}).text.textContent += event.delta;
    } else if (t === "response.output_item.done" && event.item.type === "function_call") {
      const slot = this.call(event.output_index, event.item);
      slot.text.textContent = event.item.arguments;
      slot.item = event.item;
    }
  }

  finish(response, error) {
    if (error) {
      this.status.textContent = error;
      this.status.classList.add("error");
      return;
    }
    const usage = response.usage || {};
    const repairs = (response["harmony:repairs"] || []).map((r) => r.rule);
    this.status.textContent =
      `${response.status} · ${response.id} · ${usage.input_tokens} prompt tokens, ${usage.output_tokens} output tokens` +
      (repairs.length ? ` · repairs: ${repairs.join(", ")}` : "");
    const calls = response.output.filter((item) => item.type === "function_call");
    for (const call of calls) this.offerOutput(call);
  }

  offerOutput(call) {
    const form = el("form", "row");
    const input = el("input");
    input.value = '{"temp_c": 18, "sky": "clear"}';
    input.size = 40;
    input.setAttribute("aria-label", `output of ${call.name}`);
    const button = el("button", "secondary", `Send ${call.name}'s output`);
    button.type = "submit";
    form.append(el("span", "hint", "tool output:"), input, button);
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      form.remove();
      send([{ type: "function_call_output", call_id: call.call_id, output: input.value }], `${call.name} returned ${input.value}`);
    });
    this.turn.insertBefore(form, this.status);
  }
}

async function send(input, shown) {
  addTurn("user", "you").append(el("div", "answer", shown));
  const body = { model: "gpt-oss", input, stream: true, reasoning: { effort: $("effort").value } };
  if ($("with-tool").checked) body.tools = [WEATHER_TOOL];
  if (previousId) body.previous_response_id = previousId;
  const view = new TurnView();
  $("send").disabled = true;
  try {
    const response = await fetch("/v1/responses", { method: "POST", headers: headers(), body: JSON.stringify(body) });
    if (!response.ok) {
      view.finish(null, errorText(await response.json().catch(() => null), response.status));
      return;
    }
    for await (const event of sseEvents(response)) {
      view.handle(event);
      if (event.type === "response.completed" || event.type === "response.incomplete") {
        previousId = event.response.id;
        view.finish(event.response, null);
      } else if (event.type === "response.failed") {
        view.finish(null, `failed: ${(event.response.error || {}).message || "no reason given"}`);
      } else if (event.type === "error") {
        view.finish(null, errorText(event, "stream"));
      }
    }
  } catch (err) {
    view.finish(null, `could not reach the server: ${err}`);
  } finally {
    $("send").disabled = false;
  }
}

// -- inspector -------------------------------------------------------------------------------------------

function loadExample() {
  $("inspect-request").value = JSON.stringify({ input: "What's the weather in Paris?", tools: [WEATHER_TOOL] }, null, 2);
  $("inspect-completion").value = GLITCHY_COMPLETION;
}

function readCompletion(text) {
  const trimmed = text.trim();
  if (trimmed.startsWith("[")) {
    try {
      return JSON.parse(trimmed);
    } catch {
      return text;
    }
  }
  return text;
}

function showRaw(text, repairs) {
  const pre = $("raw-text");
  const list = $("repair-list");
  pre.replaceChildren();
  list.replaceChildren();
  const marks = repairs.map((r, i) => ({ ...r, n: i + 1 })).sort((a, b) => a.text_from - b.text_from || a.text_to - b.text_to);
  let at = 0;
  for (const r of marks) {
    const start = Math.max(r.text_from, at);
    if (start > at) pre.append(document.createTextNode(text.slice(at, start)));
    const mark = el("mark", r.text_to > start ? "" : "point", text.slice(start, Math.max(r.text_to, start)));
    mark.title = `${r.rule}: ${r.detail}`;
    mark.dataset.rule = r.rule;
    mark.append(el("sup", "", String(r.n)));
    pre.append(mark);
    at = Math.max(at, r.text_to);
  }
  pre.append(document.createTextNode(text.slice(at)));
  if (!repairs.length) list.append(el("li", "", "No repair: the completion is valid Harmony as it is."));
  repairs.forEach((r, i) => {
    const li = el("li");
    li.append(el("span", "rule", r.rule), document.createTextNode(` ${r.detail}`));
    if (r.text) li.append(document.createTextNode(` — set aside: ${JSON.stringify(r.text)}`));
    li.value = i + 1;
    list.append(li);
  });
}

function showMessages(messages) {
  const box = $("messages");
  box.replaceChildren();
  for (const m of messages) {
    const div = el("div", "message");
    const head = [m.role, m.name, m.channel && `channel ${m.channel}`, m.recipient && `to ${m.recipient}`, m.content_type, m.terminator && `ends ${m.terminator}`];
    div.append(el("div", "head", head.filter(Boolean).join(" · ")));
    div.append(el("div", "body", m.content.map((c) => c.text || "").join("")));
    box.append(div);
  }
}

async function inspect() {
  const error = $("inspect-error");
  error.hidden = true;
  let request;
  try {
    request = JSON.parse($("inspect-request").value || "{}");
  } catch (err) {
    error.textContent = `The request is not JSON: ${err.message}`;
    error.hidden = false;
    return;
  }
  const body = { request, completion: readCompletion($("inspect-completion").value) };
  const response = await fetch("/v1/harmony/inspect", { method: "POST", headers: headers(), body: JSON.stringify(body) });
  const found = await response.json();
  if (!response.ok) {
    error.textContent = errorText(found, response.status);
    error.hidden = false;
    return;
  }
  showRaw(found.completion, found.repairs);
  showMessages(found.messages);
  $("prompt-tail").textContent = found.prompt.length > 300 ? `…${found.prompt.slice(-300)}` : found.prompt;
  $("served-response").textContent = JSON.stringify(found.response, null, 2);
  $("served-chat").textContent = JSON.stringify(found.chat, null, 2);
  $("inspect-result").hidden = false;
}

// -- wiring ----------------------------------------------------------------------------------------------

document.addEventListener("DOMContentLoaded", () => {
  $("api-key").value = localStorage.getItem("harmony-responses-key") || "";
  $("api-key").addEventListener("change", () => localStorage.setItem("harmony-responses-key", $("api-key").value));
  $("tab-playground").addEventListener("click", () => showTab("playground"));
  $("tab-inspector").addEventListener("click", () => showTab("inspector"));
  $("ask").addEventListener("submit", (e) => {
    e.preventDefault();
    const text = $("message").value.trim();
    if (!text) return;
    $("message").value = "";
    send(text, text);
  });
  $("message").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey) {
      e.preventDefault();
      $("ask").requestSubmit();
    }
  });
  $("new-chat").addEventListener("click", () => {
    previousId = null;
    $("conversation").replaceChildren();
  });
  $("load-example").addEventListener("click", loadExample);
  $("inspect").addEventListener("click", () => inspect().catch((err) => {
    $("inspect-error").textContent = `could not reach the server: ${err}`;
    $("inspect-error").hidden = false;
  }));
  loadExample();
  showTab(location.hash === "#inspector" ? "inspector" : "playground");
});
