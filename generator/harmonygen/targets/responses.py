"""Open Responses target: spec/responses/ → `harmony_responses.types` (pydantic v2).

datamodel-code-generator (pinned in the `gen` extra) turns the lowered schemas into models; a post-pass
then replaces the item unions it cannot express (a (type, role) discriminator, a vendor-prefixed
fallback) with code from `types/_macros.py.jinja`, drops the bundle's root alias, and formats the module
with the pinned ruff. Output is a pure function of the spec: no timestamps, no paths, no hash order.
"""

from __future__ import annotations

import ast
import importlib.metadata
import json
import subprocess
import sys
from typing import Any

import jinja2

from ..ir import ItemUnionIR, ProjectIR, ResponsesIR
from ..responses_ir import lower_bundle
from .base import Output

PACKAGE = "harmony_responses"
SUBPACKAGE = "types"
TEMPLATE_DIR = f"python/{PACKAGE}/{SUBPACKAGE}"
MODELS_MODULE = "_models"
DMCG_VERSION = "0.89.0"
BASE_CLASS = f"{PACKAGE}._types_base.SpecModel"  # hand-written, in the runtime
# Root-level aliases that get a ready-made TypeAdapter in `types/__init__.py`: (adapter, union).
ADAPTERS = (
    ("ItemFieldAdapter", "ItemField"),
    ("ItemParamAdapter", "ItemParam"),
    ("StreamingEventAdapter", "StreamingEvent"),
)
_BUNDLE_ROOT = "Model"  # datamodel-code-generator's name for the bundle document itself


class GenerationError(RuntimeError):
    """datamodel-code-generator's output does not have the shape the post-pass expects."""


def run_datamodel_codegen(bundle: dict[str, Any], header: str) -> str:
    from datamodel_code_generator import InputFileType, LiteralType, PythonVersion, generate
    from datamodel_code_generator.enums import DataModelType, NamingStrategy

    dmcg_version = importlib.metadata.version("datamodel-code-generator")
    if dmcg_version != DMCG_VERSION:
        raise GenerationError(
            f"datamodel-code-generator {dmcg_version} found, {DMCG_VERSION} pinned: `pip install -e .[gen]`"
        )
    out = generate(
        json.dumps(bundle, ensure_ascii=False),
        input_file_type=InputFileType.JsonSchema,
        output_model_type=DataModelType.PydanticV2BaseModel,
        target_python_version=PythonVersion.PY_311,
        base_class=BASE_CLASS,
        custom_file_header=header,
        disable_timestamp=True,
        enum_field_as_literal=LiteralType.All,
        use_one_literal_as_default=True,
        use_annotated=True,
        use_union_operator=True,
        use_standard_collections=True,
        use_type_alias=True,
        field_constraints=True,
        use_double_quotes=True,
        naming_strategy=NamingStrategy.ParentPrefixed,
        formatters=[],
    )
    if not isinstance(out, str):
        raise GenerationError("datamodel-code-generator returned several modules; expected one")
    return out


def _top_level(tree: ast.Module, name: str) -> ast.stmt:
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            return node
    raise GenerationError(f"datamodel-code-generator's output has no top-level {name!r}")


def tags_name(union: str) -> str:
    """`ItemParam` → `_ITEM_PARAM_TAGS`, the module-private table of its discriminator."""
    snake = "".join(f"_{c}" if c.isupper() else c for c in union).upper()
    return f"{snake}_TAGS"


def post_pass(code: str, unions: tuple[ItemUnionIR, ...], env: jinja2.Environment) -> str:
    """Replace or drop whole top-level definitions, found by name in the syntax tree."""
    macros: Any = env.get_template(f"{TEMPLATE_DIR}/_macros.py.jinja").module
    tree = ast.parse(code)
    edits: list[tuple[int, int, str]] = []  # (first line, last line) 1-based, replacement
    root = _top_level(tree, _BUNDLE_ROOT)
    edits.append((root.lineno, root.end_lineno or root.lineno, ""))
    for union in unions:
        node = _top_level(tree, union.name)
        edits.append(
            (node.lineno, node.end_lineno or node.lineno, str(macros.item_union(union, tags_name(union.name))))
        )
    lines = code.splitlines(keepends=True)
    for first, last, text in sorted(edits, reverse=True):
        lines[first - 1 : last] = [text]
    code = "".join(lines)
    imports = (
        "from pydantic import Discriminator, Tag\n"
        "from .._types_base import ExtensionItem, item_discriminator\n"
        "from typing import Union\n"
    )
    anchor = "from __future__ import annotations\n"
    if anchor not in code:
        raise GenerationError("datamodel-code-generator's output lacks `from __future__ import annotations`")
    code = code.replace(anchor, anchor + "\n" + imports, 1)
    base_import = f"from {BASE_CLASS.rsplit('.', 1)[0]} import "
    if base_import not in code:
        raise GenerationError(f"datamodel-code-generator's output lacks `{base_import}...`")
    return code.replace(base_import, "from .._types_base import ", 1)


def ruff(code: str, filename: str) -> str:
    """Sort imports, drop unused ones and format, with the pinned ruff and no project configuration."""
    common = ["--isolated", "--line-length", "120", "--target-version", "py311", "--stdin-filename", filename]
    for args in (["check", "--select", "I,F401,UP", "--fix-only", "--exit-zero", *common], ["format", *common]):
        done = subprocess.run(
            [sys.executable, "-m", "ruff", *args, "-"], input=code, capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            raise GenerationError(f"ruff {args[0]} failed on {filename}: {done.stderr.strip()}")
        code = done.stdout
    return code


def public_names(code: str) -> list[str]:
    tree = ast.parse(code)
    names = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            names.append(node.name)
        elif isinstance(node, ast.Assign):
            names += [t.id for t in node.targets if isinstance(t, ast.Name)]
    return sorted(n for n in names if not n.startswith("_"))


def emit_models(ir: ResponsesIR, env: jinja2.Environment) -> str:
    header = (
        f'"""Open Responses {ir.version} models: datamodel-code-generator {DMCG_VERSION} + harmonygen post-pass."""'
    )
    code = run_datamodel_codegen(lower_bundle(ir), header)
    code = post_pass(code, ir.item_unions, env)
    return ruff(code, f"{MODELS_MODULE}.py")


def emit(project: ProjectIR, env: jinja2.Environment, templates: str) -> list[Output]:
    ir = project.responses
    sources = project.sources_of("responses")
    models = emit_models(ir, env)
    names = public_names(models)
    base_exports = ["ExtensionItem", "SpecModel", "is_vendor_type"]
    adapters = [(a, u) for a, u in ADAPTERS if u in names]
    ctx = {
        "spec_version": ir.version,
        "names": names,
        "adapters": adapters,
        "exports": sorted([*names, *base_exports, *(a for a, _ in adapters)]),
    }
    outputs = [
        Output(
            path=f"{TEMPLATE_DIR}/{MODELS_MODULE}.py",
            text=models,
            sources=sources,
            template=f"datamodel-code-generator {DMCG_VERSION} + {templates}/{TEMPLATE_DIR}/_macros.py.jinja",
        )
    ]
    for name in ("__init__.py",):
        template = f"{TEMPLATE_DIR}/{name}.jinja"
        text = env.get_template(template).render(**ctx)
        if name == "__init__.py":
            text = ruff(text, name)
        outputs.append(
            Output(path=f"{TEMPLATE_DIR}/{name}", text=text, sources=sources, template=f"{templates}/{template}")
        )
    return outputs
