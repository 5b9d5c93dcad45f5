"""How the API modules' routes reach the app: each module builds its router once, at import, with
the guards every API route shares; create_app (main.py) adds those very routes to the app.

`app.include_router` would build every route a second time for each app, dependencies and response
models included: FastAPI 0.165 does it lazily, at the first request that reaches a router, so each
process `memvm serve` forks paid it on its own (0.5–0.8 s of CPU and some 16 MiB for the whole API,
unshared: bench/README.md), and older releases at include time. Built at import, the routes are built in the process
that forks, before it forks, and shared."""

from typing import Any

from fastapi import APIRouter, Depends, FastAPI

from memvm.api import auth, storable
from memvm.api.errors import RESPONSES

# Every API route: the caller (its key, or local mode) first, then text PostgreSQL cannot store.
GUARDS = (Depends(auth.authenticate), Depends(storable.storable_input))


def api_router(**options: Any) -> APIRouter:
    """A router of API routes: guarded, and with the shared error responses in /openapi.json."""
    return APIRouter(dependencies=list(GUARDS), responses=RESPONSES, **options)


def add_routes(app: FastAPI, router: APIRouter) -> None:
    """The router's routes, as built, served by `app` in their order (see the module's docstring)."""
    app.router.routes.extend(router.routes)
