"""The experiment spec: YAML -> typed, frozen, validated objects (pydantic v2).

``load_spec(path, overrides)`` composes ``extends:`` bases, applies Hydra-grammar overrides,
resolves ``${...}`` interpolation and allocator presets, then validates; every error names
file:line:column, the field path, what was expected and what was found.
"""

from rollcli.spec.load import load_spec, load_spec_data, spec_from_dict
from rollcli.spec.models import spec_model
from rollcli.spec.schema import spec_json_schema

__all__ = ["load_spec", "load_spec_data", "spec_from_dict", "spec_json_schema", "spec_model"]
