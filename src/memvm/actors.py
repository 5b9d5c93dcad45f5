"""Who made a change: recorded with every block write (provenance)."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Actor:
    type: str  # "api" for REST callers, "agent" for an agent's tools
    id: str | None = None
    step_id: str | None = None


API_ACTOR = Actor(type="api")
