"""The operator console at /ui/: server-rendered pages (Jinja2 + htmx) over the same services and
organization scoping as the REST routes. MEMVM_UI=false leaves it out."""

from pathlib import Path

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from memvm.api.console import agents, conversation, memory, stores
from memvm.api.console.session import PREFIX
from memvm.api.routers import add_routes

STATIC = Path(__file__).parent / "static"
ROUTERS = (agents.router, memory.router, conversation.router, stores.router)


def install(app: FastAPI) -> None:
    app.mount(f"{PREFIX}/static", StaticFiles(directory=STATIC), name="console-static")
    for router in ROUTERS:
        add_routes(app, router)
