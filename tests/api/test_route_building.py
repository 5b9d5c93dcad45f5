"""Routes are built once, at import (api/routers.py): the app serves the very route objects its
modules' routers hold, so the processes `memvm serve` forks after the import build none at their
first requests (FastAPI's include_router would build each again, in each process)."""

import importlib
import pkgutil

from fastapi import APIRouter

import memvm.api
from memvm.api import console
from tests.support.api import build_app


def _module_routers() -> list[APIRouter]:
    routers = []
    for module_info in pkgutil.iter_modules(memvm.api.__path__, "memvm.api."):
        router = getattr(importlib.import_module(module_info.name), "router", None)
        if isinstance(router, APIRouter):
            routers.append(router)
    return [*routers, *console.ROUTERS]


def test_the_app_serves_the_routes_its_modules_built(settings):
    served = {id(route) for route in build_app(settings).routes}

    built = [route for router in _module_routers() for route in router.routes]

    assert len(built) > 150  # every API module and the console's pages
    assert [route.path for route in built if id(route) not in served] == []
