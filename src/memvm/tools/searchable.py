"""What tool search reads of a tool (pure): one text of its name, description, parameters and tags,
which is embedded for search by meaning and indexed for full text (the source is indexed beside it)."""

from collections.abc import Sequence
from typing import Any


def search_text(name: str, description: str, json_schema: dict[str, Any], tags: Sequence[str]) -> str:
    """Lines of the tool's name, its description, its parameters (`name: description`) and its tags;
    the order puts what says most first, since the local embedding model reads about 256 tokens."""
    lines = [name, description]
    if parameters := _parameters(json_schema):
        lines.append("Parameters: " + "; ".join(parameters))
    if tags:
        lines.append("Tags: " + ", ".join(tags))
    return "\n".join(line for line in lines if line)


def _parameters(json_schema: dict[str, Any]) -> list[str]:
    parameters = json_schema.get("parameters")
    properties = parameters.get("properties") if isinstance(parameters, dict) else None
    if not isinstance(properties, dict):
        return []
    return [_parameter(name, spec) for name, spec in properties.items()]


def _parameter(name: str, spec: Any) -> str:
    description = spec.get("description") if isinstance(spec, dict) else None
    return f"{name}: {description}" if isinstance(description, str) and description else name
