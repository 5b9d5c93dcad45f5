"""The one table from domain errors to HTTP, and the handlers that produce {"detail": "..."}."""

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DBAPIError

from memvm.errors import (
    Busy,
    Conflict,
    DomainError,
    Forbidden,
    InvalidInput,
    LimitExceeded,
    LLMError,
    MemoryEditError,
    NotFound,
    PreconditionFailed,
    Unauthenticated,
    Unavailable,
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
    Unavailable: 503,
    LLMError: 502,  # the model provider failed outside a turn (e.g. summarize)
}
# The Letta SDK retries 409s by default; these will fail the same way again.
_NO_RETRY = {"x-should-retry": "false"}


def install(app: FastAPI) -> None:
    # The decorator form: Starlette's add_exception_handler is typed for handlers of any Exception.
    app.exception_handler(DomainError)(_domain_error)
    app.exception_handler(RequestValidationError)(_validation_error)
    app.exception_handler(DBAPIError)(_database_error)
    app.exception_handler(Exception)(_unexpected_error)


async def _domain_error(request: Request, error: DomainError) -> JSONResponse:
    status = next((code for cls, code in STATUS_OF.items() if isinstance(error, cls)), 500)
    headers = {**_NO_RETRY, "www-authenticate": "Bearer"} if status == 401 else _NO_RETRY
    body: dict[str, Any] = {"detail": error.message}
    problems = getattr(error, "problems", None)  # errors that list several reasons (agent-file import)
    if problems:
        body["problems"] = problems
    return JSONResponse(body, status_code=status, headers=headers)


async def _validation_error(request: Request, error: RequestValidationError) -> JSONResponse:
    problems = error.errors()
    malformed = next((item for item in problems if item.get("type") == "json_invalid"), None)
    if malformed is not None:
        reason = (malformed.get("ctx") or {}).get("error", "not JSON")
        where = malformed.get("loc", ("body", "?"))[-1]
        detail = f"The request body is not valid JSON ({reason} at position {where}); send a JSON object."
        return JSONResponse({"detail": detail}, status_code=400, headers=_NO_RETRY)
    detail = "; ".join(_describe(item) for item in problems)
    return JSONResponse({"detail": f"Invalid request: {detail}"}, status_code=422, headers=_NO_RETRY)


async def _database_error(request: Request, error: DBAPIError) -> JSONResponse:
    """A connection the database dropped (restart, failover) fails one request, and the pool is
    renewed: that is worth a retry, not a 500. Any other database error is a bug."""
    if not error.connection_invalidated:
        return await _unexpected_error(request, error)
    log.warning("database connection lost on %s %s: %s", request.method, request.url.path, error.orig)
    return JSONResponse(
        {"detail": "The database connection was lost; retry the request."}, status_code=503, headers={"retry-after": "1"}
    )


async def _unexpected_error(request: Request, error: Exception) -> JSONResponse:
    log.exception("unhandled error on %s %s", request.method, request.url.path)
    return JSONResponse({"detail": "Internal server error; the server log has the details."}, status_code=500)


def _describe(item: dict[str, Any]) -> str:
    where = ".".join(str(part) for part in item.get("loc", ()))
    pattern = (item.get("ctx") or {}).get("pattern", "")
    if item.get("type") == "string_pattern_mismatch" and pattern.startswith("^") and "-[0-9a-f]{8}" in pattern:
        prefix = pattern[1 : pattern.index("-[0-9a-f]{8}")]
        return f"{where}: {item.get('input')!r} is not a valid id; expected '{prefix}-<uuid4>', e.g. '{prefix}-3f2b…'"
    return f"{where}: {item.get('msg')}"
