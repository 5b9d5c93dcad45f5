"""Who is acting: the caller of a request (its organization) and the actor recorded with every
change it makes (provenance)."""

from dataclasses import dataclass

# Every server has this organization: unauthenticated local use and the admin key act in it.
DEFAULT_ORGANIZATION_ID = "org-00000000-0000-4000-8000-000000000000"
DEFAULT_ORGANIZATION_NAME = "default"


@dataclass(frozen=True)
class Actor:
    type: str  # "api_key", "admin" or "local" for REST callers; "agent" for an agent's tools
    id: str | None = None  # the API key's id, or the agent's
    step_id: str | None = None  # an agent's: the step, run and tool call that made the change
    run_id: str | None = None
    tool_call_id: str | None = None


@dataclass(frozen=True)
class Caller:
    """An authenticated (or, in local mode, trusted) request: the organization it acts in and the
    actor its writes record."""

    organization_id: str
    actor: Actor
    is_admin: bool = False


# Local mode trusts whoever reaches the loopback port, admin API included (so the first key can be made).
LOCAL_CALLER = Caller(DEFAULT_ORGANIZATION_ID, Actor("local"), is_admin=True)
ADMIN_CALLER = Caller(DEFAULT_ORGANIZATION_ID, Actor("admin"), is_admin=True)
