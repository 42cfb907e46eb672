"""JSON Schema of the spec, for editor completion (``rollcli schema > spec.schema.json``).

Adds what the loader accepts before validation: ``extends`` at the top and ``preset`` in each
allocator.
"""

from __future__ import annotations

from typing import Any

from rollcli.spec.models import allocator_config_classes, spec_model

__all__ = ["spec_json_schema"]


def spec_json_schema() -> dict[str, Any]:
    schema = spec_model().model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "rollcli experiment spec"
    schema["properties"] = {
        "extends": {
            "description": "base spec(s): a template name in rollcli/templates/specs or a relative path",
            "anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}],
        },
        **schema["properties"],
    }
    from rollcli.allocators.registry import PRESETS

    for kind, cls in allocator_config_classes().items():
        definition = schema.get("$defs", {}).get(cls.__name__)
        if definition is not None:
            presets = sorted(PRESETS.get(kind, {}))
            definition.setdefault("properties", {})["preset"] = {
                "description": "published settings to start from (explicit knobs win)",
                **({"enum": presets} if presets else {"type": "string"}),
            }
    return schema
