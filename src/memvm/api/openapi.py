"""What /openapi.json says about authentication: an API key as `Authorization: Bearer <key>` or
Letta's `X-BARE-PASSWORD: password <key>` for every operation (api/auth.py), except those that do
not depend on `authenticate` (/v1/health/), which need none. In local mode no key is needed at all;
the document describes the authenticated server, which is what clients must be ready for. It also
holds the error body that api/errors.py's RESPONSES refer to."""

from collections.abc import Iterator
from typing import Any

from fastapi import FastAPI
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute, iter_route_contexts

from memvm.api.auth import authenticate
from memvm.api.errors import ErrorBody

SECURITY_SCHEMES = {
    "bearer": {
        "type": "http",
        "scheme": "bearer",
        "description": "An API key (`mvk_...`, or the admin key): what `Letta(api_key=...)` sends.",
    },
    "bare_password": {
        "type": "apiKey",
        "in": "header",
        "name": "X-BARE-PASSWORD",
        "description": "Letta's server-password header, with an API key as the password: `password <key>`.",
    },
}


def declare_security(app: FastAPI) -> None:
    """Adds the schemes and their requirement to the app's document (FastAPI builds it on first use)."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        document = build()
        components = document.setdefault("components", {})
        components["securitySchemes"] = SECURITY_SCHEMES
        components.setdefault("schemas", {})["ErrorBody"] = ErrorBody.model_json_schema(mode="serialization")
        document["security"] = [{name: []} for name in SECURITY_SCHEMES]  # either one
        for path, method in _open_operations(app):
            document["paths"][path][method]["security"] = []
        return document

    app.openapi = openapi  # type: ignore[method-assign]  # FastAPI's documented way to extend the document


def _open_operations(app: FastAPI) -> Iterator[tuple[str, str]]:
    for route in iter_route_contexts(app.routes):
        path, api = route.path_format, isinstance(route.original_route, APIRoute)
        if path is not None and api and route.include_in_schema and not _calls(route.dependant, authenticate):
            yield from ((path, method.lower()) for method in route.methods or ())


def _calls(dependant: Dependant, dependency: object) -> bool:
    return dependant.call is dependency or any(_calls(child, dependency) for child in dependant.dependencies)
