"""generate_models.py maps the JSON Schema the document uses and refuses anything else."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import generate_models  # noqa: E402


def doc(schemas: dict[str, Any]) -> dict[str, Any]:
    return {"components": {"schemas": schemas}}


def test_mapping() -> None:
    out = generate_models.generate(doc({
        "Hit": {"type": "object", "required": ["id", "tags"], "properties": {
            "id": {"oneOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}], "description": "The id."},
            "tags": {"type": ["array", "null"], "items": {"type": "string"}},
            "kind": {"type": "string", "enum": ["a", "b"]},
            "rpc": {"const": "2.0"},
            "next": {"$ref": "#/components/schemas/Hit"},
            "extra": {"type": "object", "additionalProperties": {"type": "number"}},
            "any": {},
        }},
    }))
    assert "class Hit(TypedDict):" in out
    assert "    id: str | int | None\n    \"The id.\"" in out
    assert "    tags: list[str] | None" in out
    assert "    kind: NotRequired[Literal['a', 'b']]" in out
    assert "    rpc: NotRequired[Literal['2.0']]" in out
    assert "    next: NotRequired[Hit]" in out
    assert "    extra: NotRequired[dict[str, float]]" in out
    assert "    any: NotRequired[Any]" in out
    compile(out, "models.py", "exec")


@pytest.mark.parametrize("schema", [
    {"type": "object", "properties": {"x": {"allOf": [{"type": "string"}]}}},
    {"type": "object", "properties": {"x": {"$ref": "http://elsewhere/x.json"}}},
    {"type": "object", "properties": {"x": {"type": "object", "properties": {"y": {"type": "string"}}}}},
])
def test_refuses_what_it_does_not_map(schema: dict[str, Any]) -> None:
    with pytest.raises(SystemExit):
        generate_models.generate(doc({"X": schema}))
