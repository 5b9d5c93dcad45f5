"""The routes of letta-client that only Letta Cloud serves: each answers a 501 that says so, instead
of a 404 that would read as a missing object or a typo in the path. They stay out of /openapi.json:
memvm serves none of them."""

from collections.abc import Awaitable, Callable

from memvm.api.routers import api_router
from memvm.errors import CloudOnly

router = api_router(include_in_schema=False)

# The feature's name, and letta-client 1.12.1's paths of it with their methods.
_CLOUD_FEATURES: dict[str, dict[str, tuple[str, ...]]] = {
    "Agent templates": {
        "/v1/templates": ("GET", "POST"),
        "/v1/templates/{template_name}": ("PATCH", "DELETE"),
        "/v1/templates/{template_name}/rollback": ("POST",),
        "/v1/templates/{template_name}/save": ("POST",),
        "/v1/templates/{template_version}/agents": ("POST",),
    },
    "Scheduled messages": {
        "/v1/agents/{agent_id}/schedule": ("GET", "POST"),
        "/v1/agents/{agent_id}/schedule/{scheduled_message_id}": ("GET", "DELETE"),
    },
    "Environments": {
        "/v1/environments": ("GET",),
        "/v1/environments/{device_id}": ("GET",),
        "/v1/environments/{connection_id}/messages": ("POST",),
    },
    "Client-side access tokens": {
        "/v1/client-side-access-tokens": ("GET", "POST"),
        "/v1/client-side-access-tokens/{token}": ("DELETE",),
    },
}


def _refusal(feature: str) -> Callable[[], Awaitable[None]]:
    async def refuse() -> None:
        raise CloudOnly(f"{feature} is a Letta Cloud feature; memvm does not serve it.")

    return refuse


def _add_routes() -> None:
    for feature, paths in _CLOUD_FEATURES.items():
        for path, methods in paths.items():
            router.add_api_route(path, _refusal(feature), methods=list(methods))


_add_routes()
