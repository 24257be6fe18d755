"""The spec drives everything: rename facts in a copy of spec/, regenerate, and the runtime follows.

A copy of the project (spec, grammar, templates, runtime, pyproject) gets a renamed function namespace,
a renamed channel and a renamed control-token spelling; `harmonygen generate` rebuilds its generated/
folder; the runtime and that output are assembled into an importable package in a temporary folder,
and a fresh interpreter renders, parses (with both parsers) and bridges with it. The TypeScript package
the same generation wrote is compiled (one tsc run, against the repository's installed node_modules)
and a node process does the same. Every result uses the new names in both languages, and none of the old
spellings is left in the generated output. The copy's browser display gets other link brackets too, and the
hosted browser (Python only) writes and reads its links and citations with them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, SHARED

TS_PACKAGE = ROOT / "runtime" / "typescript"

OLD_NAMESPACE, NEW_NAMESPACE = "functions", "toolbox"
OLD_CHANNEL, NEW_CHANNEL = "analysis", "thinking"
OLD_SPELLING, NEW_SPELLING = "<|message|>", "<|body|>"
OLD_LINK, NEW_LINK = ("\u3010", "\u3011"), ("\u27e6", "\u27e7")  # the browser's link brackets

SCRIPT = r"""
import json, sys
from harmony_responses import (
    Conversation, DeveloperContent, HarmonyEncodingName, Message, Role, StreamableParser, SystemContent,
    ToolDescription, load_harmony_encoding, parse_text,
)
from harmony_responses.bridge import build_response, counting_ids, parse_request, request_to_conversation

ns, channel, spelling = sys.argv[1:4]
enc = load_harmony_encoding(HarmonyEncodingName.HARMONY_GPT_OSS)
convo = Conversation.from_messages([
    Message.from_role_and_content(Role.SYSTEM, SystemContent.new()),
    Message.from_role_and_content(Role.DEVELOPER, DeveloperContent.new().with_function_tools([
        ToolDescription.new("get_weather", "Weather.", {"type": "object", "properties": {"city": {"type": "string"}}})
    ])),
    Message.from_role_and_content(Role.USER, "Weather in Paris?"),
    Message.from_role_and_content(Role.ASSISTANT, "Look it up.").with_channel(channel),
])
rendered = enc.decode_utf8(enc.render_conversation_for_completion(convo, Role.ASSISTANT))

completion = (
    f"<|channel|>{channel}{spelling}Need the weather.<|end|>"
    f"<|start|>assistant<|channel|>commentary to={ns}.get_weather <|constrain|>json{spelling}"
    '{"city":"Paris"}<|call|>'
)
tokens = enc.encode(completion, allowed_special="all")
reference = StreamableParser(enc, Role.ASSISTANT)
for t in tokens:
    reference.process(t)
reference.process_eos()
events = parse_text(enc, completion, Role.ASSISTANT, "strict")
glued = parse_text(enc, f"<|channel|>commentary to={ns}.get_weatherjson{spelling}{{}}<|call|>", "assistant",
                   "lenient", tools=["get_weather"])
bare = parse_text(enc, f"<|channel|>commentary to=get_weather{spelling}{{}}<|call|>", "assistant", "lenient",
                  tools=["get_weather"])
request = parse_request({
    "model": "gpt-oss",
    "tools": [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}],
    "input": [
        {"type": "message", "role": "user", "content": "Weather in Paris?"},
        {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
    ],
})
prompt = enc.decode_utf8(enc.render_conversation_for_completion(request_to_conversation(request), Role.ASSISTANT))
response = build_response(tokens, enc, request, ids=counting_ids())
print(json.dumps({
    "rendered": rendered,
    "prompt": prompt,
    "token_of_spelling": enc.encode(spelling, allowed_special="all"),
    "reference": [m.to_dict() for m in reference.messages],
    "events": [m.to_dict() for m in events],
    "glued": [m.to_dict() for m in glued],
    "bare": [m.to_dict() for m in bare],
    "output": response.model_dump(mode="json")["output"],
}))
"""


BROWSER_SCRIPT = r"""
import json, sys
from harmony_responses.server.hosted.base import Citation
from harmony_responses.server.hosted.browser import citation_annotations, html_to_page

new_open, new_close, old_open, old_close = sys.argv[1:5]
text = f"{new_open}y{new_close} {old_open}x{old_close}"
html = f'<title>T</title><p>See <a href="https://other.example/x">there</a> {text}</p>'
page = html_to_page(html, "https://example.org/")
answer = f"Yes {new_open}0\u2020L0{new_close} and {old_open}0\u2020L0{old_close}."
cited = citation_annotations(answer, {0: Citation(0, "https://example.org/", "T")})
print(json.dumps({"lines": page.lines, "cited": [(c.start_index, c.end_index) for c in cited]}, ensure_ascii=False))
"""


TS_SCRIPT = r"""
const [dist, ns, channel, spelling] = process.argv.slice(2);
const H = await import(dist + "/index.js");
const B = await import(dist + "/bridge/index.js");
const { Conversation, DeveloperContent, Message, Role, StreamableParser, SystemContent, ToolDescription } = H;
const enc = H.loadHarmonyEncoding("HarmonyGptOss");
const convo = Conversation.fromMessages([
  Message.fromRoleAndContent(Role.System, SystemContent.new()),
  Message.fromRoleAndContent(Role.Developer, DeveloperContent.new().withFunctionTools([
    ToolDescription.new("get_weather", "Weather.", { type: "object", properties: { city: { type: "string" } } }),
  ])),
  Message.fromRoleAndContent(Role.User, "Weather in Paris?"),
  Message.fromRoleAndContent(Role.Assistant, "Look it up.").withChannel(channel),
]);
const rendered = enc.decodeUtf8(enc.renderConversationForCompletion(convo, Role.Assistant));
const completion =
  `<|channel|>${channel}${spelling}Need the weather.<|end|>` +
  `<|start|>assistant<|channel|>commentary to=${ns}.get_weather <|constrain|>json${spelling}` +
  '{"city":"Paris"}<|call|>';
const tokens = enc.encode(completion, { allowedSpecial: "all" });
const reference = new StreamableParser(enc, Role.Assistant);
for (const t of tokens) reference.process(t);
reference.processEos();
const events = H.parseText(enc, completion, Role.Assistant, "strict");
const glued = H.parseText(enc, `<|channel|>commentary to=${ns}.get_weatherjson${spelling}{}<|call|>`, "assistant",
  "lenient", ["get_weather"]);
const bare = H.parseText(enc, `<|channel|>commentary to=get_weather${spelling}{}<|call|>`, "assistant", "lenient",
  ["get_weather"]);
const request = B.parseRequest({
  model: "gpt-oss",
  tools: [{ type: "function", name: "get_weather", parameters: { type: "object" } }],
  input: [
    { type: "message", role: "user", content: "Weather in Paris?" },
    { type: "function_call", call_id: "c1", name: "get_weather", arguments: "{}" },
    { type: "function_call_output", call_id: "c1", output: "sunny" },
  ],
});
const prompt = enc.decodeUtf8(enc.renderConversationForCompletion(B.requestToConversation(request), Role.Assistant));
const response = B.dumpAs("ResponseResource", B.buildResponse(tokens, enc, request, { ids: B.countingIds() }));
console.log(JSON.stringify({
  rendered,
  prompt,
  token_of_spelling: enc.encode(spelling, { allowedSpecial: "all" }),
  reference: reference.messages.map((m) => m.toDict()),
  events: events.map((m) => m.toDict()),
  glued: glued.map((m) => m.toDict()),
  bare: bare.map((m) => m.toDict()),
  output: JSON.parse(JSON.stringify(response)).output,
}));
"""


def _mutated_project(tmp: Path) -> Path:
    project = tmp / "project"
    for name in ("spec", "grammar", "templates", "runtime"):
        # not what a build made in the repository: the TypeScript package's copies of generated/, dist, build
        build_products = shutil.ignore_patterns("__pycache__", "node_modules", "generated", "dist", "build")
        shutil.copytree(ROOT / name, project / name, ignore=build_products)
    shutil.copy(ROOT / "pyproject.toml", project / "pyproject.toml")
    shutil.copy(ROOT / "LICENSE", project / "LICENSE")  # the npm package ships it
    fmt_path = project / "spec/harmony/format.json"
    fmt = json.loads(fmt_path.read_text(encoding="utf-8"))
    assert fmt["header"]["function_namespace"] == OLD_NAMESPACE
    fmt["header"]["function_namespace"] = NEW_NAMESPACE
    (channel,) = [c for c in fmt["channels"] if c["name"] == OLD_CHANNEL]
    channel["name"] = NEW_CHANNEL
    browser = fmt["browser_display"]
    assert (browser["link_open"], browser["link_close"]) == OLD_LINK
    browser["link_open"], browser["link_close"] = NEW_LINK
    fmt_path.write_text(json.dumps(fmt, indent=2, ensure_ascii=False), encoding="utf-8")
    builtins_path = project / "spec/harmony/builtin_tools.json"  # its browser description spells them too
    builtins = builtins_path.read_text(encoding="utf-8")
    for old, new in zip(OLD_LINK, NEW_LINK, strict=True):
        builtins = builtins.replace(old, new)
    builtins_path.write_text(builtins, encoding="utf-8")
    tokens_path = project / "spec/harmony/tokens.json"
    tokens = json.loads(tokens_path.read_text(encoding="utf-8"))
    (token,) = [t for t in tokens["named"] if t["spelling"] == OLD_SPELLING]
    token["spelling"] = NEW_SPELLING
    tokens_path.write_text(json.dumps(tokens, indent=2, ensure_ascii=False), encoding="utf-8")
    return project


def _assemble(project: Path, dest: Path) -> Path:
    """The importable package: the runtime, with the mutated project's generated subpackages in it."""
    package = dest / "harmony_responses"
    shutil.copytree(project / "runtime/python/harmony_responses", package)
    for sub in ("_generated", "types"):
        shutil.copytree(project / "generated/python/harmony_responses" / sub, package / sub)
    return dest


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The mutated project, with its generated/ folder rebuilt."""
    project = _mutated_project(tmp_path_factory.mktemp("mutation"))
    done = subprocess.run(
        [sys.executable, "-m", "harmonygen", "generate", "--root", str(project)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    return project


@pytest.fixture(scope="module")
def mutated(generated: Path) -> tuple[Path, dict[str, object]]:
    project = generated
    tmp = project.parent
    site = _assemble(project, tmp / "site")
    env = {**os.environ, "PYTHONPATH": str(site), "TIKTOKEN_ENCODINGS_BASE": str(SHARED / "vocab")}
    run = subprocess.run(
        [sys.executable, "-c", SCRIPT, NEW_NAMESPACE, NEW_CHANNEL, NEW_SPELLING],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp,
    )
    assert run.returncode == 0, run.stderr
    probe = subprocess.run(
        [sys.executable, "-c", "import harmony_responses; print(harmony_responses.__file__)"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp,
    )
    assert probe.stdout.strip().startswith(str(site)), probe.stdout  # the assembled copy was imported
    return project, json.loads(run.stdout)


@pytest.fixture(scope="module")
def mutated_browser(generated: Path) -> dict[str, object]:
    """What the hosted browser of the mutated package writes for a page and reads as citations."""
    tmp = generated.parent
    site = _assemble(generated, tmp / "browser-site")
    env = {**os.environ, "PYTHONPATH": str(site)}
    run = subprocess.run(
        [sys.executable, "-c", BROWSER_SCRIPT, *NEW_LINK, *OLD_LINK], capture_output=True, text=True, env=env, cwd=tmp
    )
    assert run.returncode == 0, run.stderr
    result: dict[str, object] = json.loads(run.stdout)
    return result


@pytest.fixture(scope="module")
def mutated_ts(generated: Path) -> dict[str, object]:
    """The mutated project's TypeScript package, compiled, doing what `SCRIPT` does in node."""
    package = generated / "runtime" / "typescript"
    modules = TS_PACKAGE / "node_modules"
    if not (modules / ".bin" / "tsc").is_file():
        raise RuntimeError(f"{modules} is not installed: run `make ts-deps` (make test does)")
    (package / "node_modules").symlink_to(modules, target_is_directory=True)
    shutil.copytree(generated / "generated" / "typescript" / "src", package / "src" / "generated")  # as make ts-build
    build = subprocess.run([str(modules / ".bin" / "tsc"), "-p", str(package)], capture_output=True, text=True)
    assert build.returncode == 0, build.stdout + build.stderr
    script = generated.parent / "mutation.mjs"
    script.write_text(TS_SCRIPT, encoding="utf-8")
    dist = package / "dist"
    env = {**os.environ, "TIKTOKEN_ENCODINGS_BASE": str(SHARED / "vocab")}
    run = subprocess.run(
        ["node", str(script), dist.as_uri(), NEW_NAMESPACE, NEW_CHANNEL, NEW_SPELLING],
        capture_output=True,
        text=True,
        env=env,
    )
    assert run.returncode == 0, run.stderr
    result: dict[str, object] = json.loads(run.stdout)
    return result


def _check_rendering(out: dict[str, object]) -> None:
    rendered = str(out["rendered"])
    assert f"namespace {NEW_NAMESPACE} {{" in rendered
    assert f"# Valid channels: {NEW_CHANNEL}, commentary, final." in rendered
    assert f"Calls to these tools must go to the commentary channel: '{NEW_NAMESPACE}'." in rendered
    assert f"<|channel|>{NEW_CHANNEL}{NEW_SPELLING}Look it up." in rendered
    assert out["token_of_spelling"] == [200008]  # the new spelling is the same token
    prompt = str(out["prompt"])
    assert f"to={NEW_NAMESPACE}.get_weather<|channel|>commentary <|constrain|>json{NEW_SPELLING}" in prompt
    assert f"<|start|>{NEW_NAMESPACE}.get_weather to=assistant<|channel|>commentary{NEW_SPELLING}sunny" in prompt
    for old in (OLD_NAMESPACE, OLD_CHANNEL, OLD_SPELLING):
        assert old not in rendered and old not in prompt, old


def _check_parsers(out: dict[str, object]) -> None:
    expected = [
        (NEW_CHANNEL, None, "Need the weather."),
        ("commentary", f"{NEW_NAMESPACE}.get_weather", '{"city":"Paris"}'),
    ]
    for parser in ("reference", "events"):
        messages = out[parser]
        assert isinstance(messages, list)
        got = [(m.get("channel"), m.get("recipient"), m["content"][0]["text"]) for m in messages]
        assert got == expected, parser
    glued_messages, bare_messages = out["glued"], out["bare"]
    assert isinstance(glued_messages, list) and isinstance(bare_messages, list)
    (glued,) = glued_messages
    assert (glued["recipient"], glued["content_type"]) == (f"{NEW_NAMESPACE}.get_weather", "json")
    (bare,) = bare_messages
    assert bare["recipient"] == f"{NEW_NAMESPACE}.get_weather"


def _check_bridge(out: dict[str, object]) -> None:
    output = out["output"]
    assert isinstance(output, list)
    assert [item["type"] for item in output] == ["reasoning", "function_call"]
    assert output[0]["content"][0]["text"] == "Need the weather."
    assert (output[1]["name"], output[1]["arguments"]) == ("get_weather", '{"city":"Paris"}')


def test_rendering_follows_the_new_names(mutated: tuple[Path, dict[str, object]]) -> None:
    _check_rendering(mutated[1])


def test_both_parsers_follow_the_new_names(mutated: tuple[Path, dict[str, object]]) -> None:
    _check_parsers(mutated[1])


def test_the_bridge_follows_the_new_names(mutated: tuple[Path, dict[str, object]]) -> None:
    _check_bridge(mutated[1])


def test_typescript_follows_the_new_names(mutated_ts: dict[str, object]) -> None:
    _check_rendering(mutated_ts)
    _check_parsers(mutated_ts)
    _check_bridge(mutated_ts)


def test_both_languages_give_the_same_results(
    mutated: tuple[Path, dict[str, object]], mutated_ts: dict[str, object]
) -> None:
    assert mutated_ts == mutated[1]


def test_the_browser_follows_the_new_link_brackets(mutated_browser: dict[str, object]) -> None:
    (new_open, new_close), (old_open, old_close) = NEW_LINK, OLD_LINK
    # links use the new brackets; page text spelling them shows the spec's replacements; the old ones are plain text
    link = f"{new_open}0\u2020there\u2020other.example{new_close}"
    assert mutated_browser["lines"] == [f"See {link} \u3016y\u3017 {old_open}x{old_close}"]
    assert mutated_browser["cited"] == [[4, 10]]  # the citation in the new brackets, not the one in the old


def test_no_old_spelling_is_left_in_the_generated_output(mutated: tuple[Path, dict[str, object]]) -> None:
    project, _ = mutated
    generated = project / "generated"
    # MANIFEST.json holds paths and hashes; docs/api.md is the runtime's docstrings, prose written by hand;
    # node_modules is what npm makes of it, not generation.
    files = [
        p
        for p in generated.rglob("*")
        if p.is_file()
        and p.name not in ("MANIFEST.json", "api.md")
        and not {"dist", "node_modules"} & set(p.relative_to(generated).parts)
    ]
    assert any(p.name == "spec.py" for p in files)
    for path in files:
        text = path.read_text(encoding="utf-8")
        if path.name == "ir.json":  # the IR names its sources; their paths say nothing of the format
            text = "\n".join(line for line in text.splitlines() if "spec/" not in line)
        for old in (OLD_SPELLING, f"to={OLD_NAMESPACE}", f"namespace {OLD_NAMESPACE}", f'"{OLD_NAMESPACE}"'):
            assert old not in text, f"{path.relative_to(project)} still holds {old!r}"
        if path.suffix == ".py" and "types" not in path.parts:
            assert f'"{OLD_CHANNEL}"' not in text, f"{path.relative_to(project)} still holds {OLD_CHANNEL!r}"
