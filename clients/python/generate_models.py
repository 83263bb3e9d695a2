"""Generate matememory/models.py (TypedDicts) from MateMemory's served OpenAPI document.

    python3 generate_models.py openapi.json > matememory/models.py
    python3 generate_models.py http://127.0.0.1:8080/api/v1/openapi.json > matememory/models.py

No generator for OpenAPI 3.1 into TypedDicts is packaged by Debian, and the document uses
only plain JSON Schema (object, array, scalar types, nullable unions, enums, const, oneOf and
anyOf of those, $ref), so this maps exactly that and refuses anything else rather than guessing. pkg/internal/test/clients/clients_test.go
regenerates the file from the live document and fails when the committed one differs.
"""

from __future__ import annotations

import json
import keyword
import sys
import urllib.request
from typing import Any

SCALARS = {"string": "str", "integer": "int", "number": "float", "boolean": "bool"}
# Keys that describe or constrain a value but do not change its Python type.
IGNORED = {
    "description", "examples", "format", "minimum", "maximum", "maxLength", "minLength",
    "pattern", "default", "readOnly", "deprecated", "title", "maxItems", "minItems",
    "exclusiveMinimum", "exclusiveMaximum", "uniqueItems", "contentEncoding", "$schema",
}


def ref_name(ref: str) -> str:
    prefix = "#/components/schemas/"
    if not ref.startswith(prefix):
        raise SystemExit(f"unsupported $ref {ref!r}")
    return ref[len(prefix):]


def py_type(s: dict[str, Any], where: str) -> str:
    unknown = set(s) - IGNORED - {"type", "items", "$ref", "enum", "const", "properties", "required", "additionalProperties", "oneOf", "anyOf"}
    if unknown:
        raise SystemExit(f"{where}: unsupported schema keys {sorted(unknown)}")
    if "$ref" in s:
        return ref_name(s["$ref"])
    for key in ("oneOf", "anyOf"):
        if key in s:
            if set(s) - IGNORED - {key}:
                raise SystemExit(f"{where}: {key} beside other type keys")
            members: list[str] = []
            for i, m in enumerate(s[key]):
                for part in py_type(m, f"{where}.{key}[{i}]").split(" | "):
                    if part not in members:
                        members.append(part)
            # None last, as the other unions have it.
            return " | ".join(sorted(members, key=lambda m: m == "None"))
    if "const" in s:
        return f"Literal[{s['const']!r}]"
    types = s.get("type")
    if types is None:
        return "Any"
    if isinstance(types, str):
        types = [types]
    parts = []
    for t in types:
        if t == "null":
            continue
        if "enum" in s:
            parts.append("Literal[" + ", ".join(repr(v) for v in s["enum"] if v is not None) + "]")
        elif t in SCALARS:
            parts.append(SCALARS[t])
        elif t == "array":
            parts.append(f"list[{py_type(s.get('items', {}), where + '[]')}]")
        elif t == "object":
            if s.get("properties"):
                raise SystemExit(f"{where}: inline object with properties; name it in components")
            extra = s.get("additionalProperties")
            parts.append(f"dict[str, {py_type(extra, where + '{}') if isinstance(extra, dict) else 'Any'}]")
        else:
            raise SystemExit(f"{where}: unsupported type {t!r}")
    if "null" in types:
        parts.append("None")
    return " | ".join(parts) if parts else "None"


def typed_dict(name: str, s: dict[str, Any]) -> str:
    if s.get("type") != "object" or "properties" not in s:
        return f"{name} = {py_type(s, name)}\n"
    required = set(s.get("required") or [])
    fields = []
    for prop, ps in sorted(s["properties"].items()):
        t = py_type(ps, f"{name}.{prop}")
        fields.append((prop, t if prop in required else f"NotRequired[{t}]", ps.get("description", "")))
    doc = s.get("description", "").strip()
    if all(p.isidentifier() and not keyword.iskeyword(p) for p, _, _ in fields):
        lines = [f"class {name}(TypedDict):"]
        lines.append(f"    {json.dumps(doc, ensure_ascii=False)}" if doc else f'    """The {name} schema."""')
        for prop, t, desc in fields:
            lines.append(f"    {prop}: {t}")
            if desc:
                lines.append(f"    {json.dumps(desc.strip(), ensure_ascii=False)}")
        return "\n".join(lines) + "\n"
    body = ", ".join(f"{p!r}: {t}" for p, t, _ in fields)
    return f"{name} = TypedDict({name!r}, {{{body}}})\n"


def generate(doc: dict[str, Any]) -> str:
    out = [
        '"""MateMemory API models, generated from the served OpenAPI document by generate_models.py.',
        "",
        "Do not edit: regenerate (pkg/internal/test/clients/clients_test.go fails when this file drifts).",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        "from typing import Any, Literal, NotRequired, TypedDict",
        "",
        "__all__ = [",
    ]
    schemas = doc["components"]["schemas"]
    out += [f"    {name!r}," for name in sorted(schemas)]
    out += ["]", ""]
    for name in sorted(schemas):
        out += ["", typed_dict(name, schemas[name])]
    return "\n".join(out).rstrip() + "\n"


def main() -> None:
    src = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8080/api/v1/openapi.json"
    if src.startswith(("http://", "https://")):
        with urllib.request.urlopen(src) as r:
            doc = json.load(r)
    else:
        with open(src, encoding="utf-8") as f:
            doc = json.load(f)
    sys.stdout.write(generate(doc))


if __name__ == "__main__":
    main()
