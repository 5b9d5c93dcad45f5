"""The one table from domain errors to HTTP, and the handlers that produce {"detail": "..."}."""

import logging
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.routing import iter_route_contexts
from pydantic import BaseModel
from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException
from starlette.routing import Match

from memvm.api.storable import MAX_JSON_DEPTH
from memvm.errors import (
    Busy,
    CloudOnly,
    Conflict,
    DomainError,
    Forbidden,
    InvalidInput,
    LimitExceeded,
    LLMError,
    MemoryEditError,
    NotFound,
    Overloaded,
    PreconditionFailed,
    TooLarge,
    Unauthenticated,
    Unavailable,
    UnsupportedMediaType,
)

log = logging.getLogger(__name__)

STATUS_OF = {
    Unauthenticated: 401,
    Forbidden: 403,
    NotFound: 404,
    Conflict: 409,
    Busy: 409,
    LimitExceeded: 422,  # before its base InvalidInput: the SDK raises UnprocessableEntityError
    InvalidInput: 400,
    MemoryEditError: 400,
    PreconditionFailed: 412,
    TooLarge: 413,
    UnsupportedMediaType: 415,
    Unavailable: 503,
    Overloaded: 503,
    LLMError: 502,  # the model provider failed outside a turn (e.g. summarize)
    CloudOnly: 501,
}
# The Letta SDK retries 409s by default; these will fail the same way again.
_NO_RETRY = {"x-should-retry": "false"}
# An answer that a moment later will be different (the SDK retries a 503 after `retry-after`).
_RETRY_SOON = {"retry-after": "1"}
# deadlock_detected and serialization_failure: PostgreSQL failed this transaction so that a concurrent
# one could go on. Paths lock in one order (files/service.py) so none should escape; if one does, the
# same request again will do.
_COLLISION_SQLSTATES = frozenset({"40P01", "40001"})
# too_many_connections: the database (or the role) has no connection slot left. Connections free up
# as requests end, so this is the database being full for a moment, not a bug.
_FULL_SQLSTATES = frozenset({"53300"})


class ErrorBody(BaseModel):
    """What every error answer carries: `detail` says what is wrong and how to fix it; `problems`
    lists every reason when there are several (agent-file import)."""

    detail: str
    problems: list[str] | None = None


# By reference, and the component added once (api/openapi.py): with a "model" here, FastAPI would
# build a field of ErrorBody for each status of each route at import (some 1,750, half a second).
_ERROR_BODY_REF = {"$ref": "#/components/schemas/ErrorBody"}


def _documented(description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": _ERROR_BODY_REF}}}


# The error answers of the authenticated routes (main.py), as /openapi.json documents them: the
# statuses of STATUS_OF, the handlers below and the body cap (api/limits.py), in one shape. The 422
# replaces FastAPI's default HTTPValidationError, whose `detail` is a list: memvm's is a sentence.
RESPONSES: dict[int | str, dict[str, Any]] = {
    400: _documented("Input the schema cannot rule out: malformed JSON, an unknown name, bad source code, …"),
    401: _documented("No API key, or an unknown or revoked one."),
    403: _documented("The key may not do this: the admin API with an organization's key, editing a built-in tool."),
    404: _documented("No such object in the caller's organization."),
    409: _documented(
        "The request clashes with the current state: a duplicate name, a turn already running, a pending approval; "
        "or it collided with a concurrent change (retry it)."
    ),
    412: _documented("If-Match names a block version that is no longer current."),
    413: _documented(
        "The request body is over MEMVM_MAX_REQUEST_BYTES (MEMVM_MAX_AGENT_FILE_BYTES for imports, "
        "MEMVM_MAX_FILE_UPLOAD_BYTES for a folder's files)."
    ),
    422: _documented("Invalid request, or a block value over its limit; `detail` names the field and the reason."),
    502: _documented("The model provider failed outside a turn (e.g. summarize)."),
    503: _documented(
        "The database connection was lost, or every pooled connection stayed busy (too many requests or turns at once), "
        "or the server cannot do this as configured; retry after `retry-after`."
    ),
}

# Only routes that read an uploaded document's type answer it (folder uploads).
UNSUPPORTED_MEDIA_TYPE: dict[int | str, dict[str, Any]] = {
    415: _documented("The server cannot read files of this type; `detail` lists the extensions it reads.")
}


def install(app: FastAPI) -> None:
    # The decorator form: Starlette's add_exception_handler is typed for handlers of any Exception.
    app.exception_handler(DomainError)(_domain_error)
    app.exception_handler(RequestValidationError)(_validation_error)
    app.exception_handler(HTTPException)(_http_error)
    app.exception_handler(DBAPIError)(_database_error)
    app.exception_handler(PoolTimeout)(_pool_exhausted)
    app.exception_handler(Exception)(_unexpected_error)


def status_of(error: DomainError) -> int:
    return next((code for cls, code in STATUS_OF.items() if isinstance(error, cls)), 500)


async def _domain_error(request: Request, error: DomainError) -> JSONResponse:
    status = status_of(error)
    headers = _RETRY_SOON if isinstance(error, Overloaded) else _NO_RETRY
    if status == 401:
        headers = {**headers, "www-authenticate": _challenge(request)}
    body: dict[str, Any] = {"detail": error.message}
    problems = getattr(error, "problems", None)  # errors that list several reasons (agent-file import)
    if problems:
        body["problems"] = problems
    return JSONResponse(body, status_code=status, headers=headers)


def _challenge(request: Request) -> str:
    """git asks its credential helper for a username and password only when challenged with Basic."""
    return 'Basic realm="memvm"' if request.url.path.startswith("/v1/git/") else "Bearer"


async def _validation_error(request: Request, error: RequestValidationError) -> JSONResponse:
    problems = error.errors()
    malformed = next((item for item in problems if item.get("type") == "json_invalid"), None)
    if malformed is not None:
        reason = (malformed.get("ctx") or {}).get("error", "not JSON")
        where = malformed.get("loc", ("body", "?"))[-1]
        detail = f"The request body is not valid JSON ({reason} at position {where}); send a JSON object."
        return JSONResponse({"detail": detail}, status_code=400, headers=_NO_RETRY)
    detail = describe_problems(problems)
    return JSONResponse({"detail": f"Invalid request: {detail}"}, status_code=422, headers=_NO_RETRY)


async def _http_error(request: Request, error: HTTPException) -> Response:
    """FastAPI's own errors, with the reason its body parser hides when it can say what to fix."""
    cause = error.__cause__
    if isinstance(cause, RecursionError):  # valid JSON, too deep for the parser (api/storable.py: deep but parsed)
        detail = f"The request body is nested deeper than {MAX_JSON_DEPTH} levels of objects and arrays; send a flatter document."
        return JSONResponse({"detail": detail}, status_code=422, headers=_NO_RETRY)
    if isinstance(cause, UnicodeDecodeError):
        byte = cause.object[cause.start]
        detail = f"The request body is not valid UTF-8 (byte {byte:#04x} at position {cause.start}); send JSON in UTF-8."
        return JSONResponse({"detail": detail}, status_code=400, headers=_NO_RETRY)
    if error.status_code == 405:
        return _method_not_allowed(request)
    return await http_exception_handler(request, error)


def _method_not_allowed(request: Request) -> JSONResponse:
    """Starlette's 405 allows the methods of the first route whose path matched; a path several
    routes serve (GET and POST /v1/agents/) allows the methods of them all."""
    matching = (route for route in iter_route_contexts(request.app.routes) if route.matches(dict(request.scope))[0] != Match.NONE)
    allowed = ", ".join(sorted({method for route in matching for method in route.methods or ()}))
    detail = f"{request.method} is not allowed on {request.url.path}; it allows {allowed}."
    return JSONResponse({"detail": detail}, status_code=405, headers={"allow": allowed, **_NO_RETRY})


async def _database_error(request: Request, error: DBAPIError) -> JSONResponse:
    """A connection the database dropped (restart, failover), or a database that cannot be reached
    at all (stopped, starting up: db/engine.py marks these as disconnects too), fails the request and
    the pool is renewed: that is worth a retry, not a 500. So is a collision with a concurrent change
    (a 409 the SDK retries), and a database with no connection slot left (a 503). Any other database
    error is a bug."""
    if getattr(error.orig, "sqlstate", None) in _COLLISION_SQLSTATES:
        log.warning("concurrent change collided on %s %s: %s", request.method, request.url.path, error.orig)
        detail = "The change collided with a concurrent change; retry it."
        return JSONResponse({"detail": detail}, status_code=409, headers={"x-should-retry": "true"})
    if getattr(error.orig, "sqlstate", None) in _FULL_SQLSTATES:
        log.warning("no database connection free on %s %s: %s", request.method, request.url.path, error.orig)
        detail = "The database has no free connection (too many clients); retry the request."
        return JSONResponse({"detail": detail}, status_code=503, headers={"retry-after": "1"})
    if not error.connection_invalidated:
        return await _unexpected_error(request, error)
    log.warning("database connection lost on %s %s: %s", request.method, request.url.path, error.orig)
    return JSONResponse(
        {"detail": "The database connection was lost; retry the request."}, status_code=503, headers={"retry-after": "1"}
    )


async def _pool_exhausted(request: Request, error: PoolTimeout) -> JSONResponse:
    """Every session connection of this process stayed in use while the request waited for one
    (MEMVM_DB_POOL_TIMEOUT_SECONDS): the process is overloaded for a moment, not broken."""
    log.warning("no pooled database connection free on %s %s: %s", request.method, request.url.path, error)
    detail = (
        "The server is handling as many requests as its database connections allow (MEMVM_DB_POOL_SIZE + "
        "MEMVM_DB_MAX_OVERFLOW) and none ended while this one waited; retry the request."
    )
    return await _domain_error(request, Overloaded(detail))


async def _unexpected_error(request: Request, error: Exception) -> JSONResponse:
    log.exception("unhandled error on %s %s", request.method, request.url.path)
    return JSONResponse({"detail": "Internal server error; the server log has the details."}, status_code=500)


def describe_problems(problems: Sequence[Any]) -> str:
    """Validation problems as one sentence: each field's path and what is wrong with it."""
    return "; ".join(_describe(item) for item in problems)


def _describe(item: dict[str, Any]) -> str:
    where = ".".join(str(part) for part in item.get("loc", ()))
    pattern = (item.get("ctx") or {}).get("pattern", "")
    if item.get("type") == "string_pattern_mismatch" and pattern.startswith("^") and "-[0-9a-f]{8}" in pattern:
        prefix = pattern[1 : pattern.index("-[0-9a-f]{8}")]
        return f"{where}: {item.get('input')!r} is not a valid id; expected '{prefix}-<uuid4>', e.g. '{prefix}-3f2b…'"
    return f"{where}: {item.get('msg')}"
