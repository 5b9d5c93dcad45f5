"""Who is using the console, and the guards every console page shares.

Signing in stores the API key in an HttpOnly cookie scoped to /ui (Secure over https): each request
is then checked by the same gate as the REST routes (api/auth.py), so a revoked key is refused at
once on every replica, and no session state lives in the server. In local mode (no keys at all)
the cookie holds a random value instead. Forms are protected against cross-site requests twice: the
browser must send the page's own Origin (when it sends one), and every change carries a token derived
from the cookie, which another site cannot read."""

import functools
import hashlib
import hmac
import secrets
from collections.abc import Callable, Coroutine
from importlib.resources import files
from typing import TYPE_CHECKING, Annotated, Any
from urllib.parse import urlsplit

from fastapi import APIRouter, Depends, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import RedirectResponse
from fastapi.routing import APIRoute

from memvm.actors import Caller
from memvm.api.auth import GateDep
from memvm.api.deps import SessionmakerDep, Transaction, transaction_in
from memvm.api.errors import describe_problems, status_of
from memvm.api.storable import storable_input
from memvm.errors import DomainError, Forbidden, Unauthenticated

if TYPE_CHECKING:
    from fastapi.templating import Jinja2Templates

COOKIE = "memvm_console"
CSRF_HEADER = "x-csrf-token"
CSRF_FIELD = "csrf_token"
PREFIX = "/ui"
SIGN_IN = f"{PREFIX}/sign-in"
_SAFE_METHODS = {"GET", "HEAD", "OPTIONS"}


@functools.cache
def templates() -> "Jinja2Templates":
    """The console's templates. Jinja2 loads on the first page a process renders: most servers never
    render one, and their start would pay a tenth of a second of CPU for it."""
    from fastapi.templating import Jinja2Templates

    return Jinja2Templates(directory=str(files("memvm.api.console").joinpath("templates")))


# What the console's pages may load: only their own scripts and styles, never inline ones.
_SECURITY_HEADERS = {
    "content-security-policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; object-src 'none'; "
        "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    ),
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
    "cache-control": "no-store",
}


class SignInRequired(Exception):
    """No cookie, or its key is no longer valid: the browser is sent to the sign-in page."""


def console_router(prefix: str) -> APIRouter:
    """A router of console pages: left out of /openapi.json (they are HTML, not the API); text
    PostgreSQL cannot store is refused before a route runs, as on the REST routes (api/storable.py)."""
    return APIRouter(prefix=prefix, route_class=ConsoleRoute, include_in_schema=False, dependencies=[Depends(storable_input)])


def csrf_token(cookie: str) -> str:
    return hmac.new(cookie.encode(), b"memvm-console-csrf", hashlib.sha256).hexdigest()


def new_local_cookie() -> str:
    return secrets.token_urlsafe(32)


def set_cookie(response: Response, request: Request, value: str) -> None:
    secure = request.url.scheme == "https"
    response.set_cookie(COOKIE, value, path=PREFIX, httponly=True, secure=secure, samesite="lax")


def clear_cookie(response: Response) -> None:
    response.delete_cookie(COOKIE, path=PREFIX)


async def console_caller(request: Request, gate: GateDep) -> Caller:
    cookie = request.cookies.get(COOKIE)
    if cookie is None:
        raise SignInRequired
    try:
        return await gate.caller(cookie)
    except Unauthenticated as refused:
        raise SignInRequired from refused


ConsoleCaller = Annotated[Caller, Depends(console_caller)]


async def _console_transaction(sessionmaker: SessionmakerDep, caller: ConsoleCaller) -> Transaction:
    return transaction_in(sessionmaker, caller)


# As TransactionDep of the REST routes: one transaction in the signed-in organization.
ConsoleTx = Annotated[Transaction, Depends(_console_transaction)]


def page(request: Request, template: str, status_code: int = 200, **context: Any) -> Response:
    cookie = request.cookies.get(COOKIE)
    context["csrf"] = csrf_token(cookie) if cookie else ""
    return templates().TemplateResponse(request, template, context, status_code=status_code)


def is_htmx(request: Request) -> bool:
    return request.headers.get("hx-request") == "true"


class ConsoleRoute(APIRoute):
    """Every console route: cross-site checks before the handler; a missing sign-in becomes a
    redirect and a domain error an HTML message (not the JSON of the REST routes); security headers
    on every answer."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def guarded(request: Request) -> Response:
            try:
                await _check_cross_site(request)
                response = await handler(request)
            except SignInRequired:
                response = _to_sign_in(request)
            except DomainError as error:
                response = _error_page(request, status_of(error), error.message)
            except RequestValidationError as error:
                response = _error_page(request, 422, f"Invalid request: {describe_problems(error.errors())}")
            response.headers.update(_SECURITY_HEADERS)
            return response

        return guarded


async def _check_cross_site(request: Request) -> None:
    if request.method in _SAFE_METHODS:
        return
    origin = request.headers.get("origin")
    # Host against host: behind a TLS proxy the browser's scheme (https) is not the one this server sees.
    if origin is not None and urlsplit(origin).netloc != request.headers.get("host"):
        raise Forbidden(f"Refused a form sent from another site ({origin}).")
    if request.url.path == SIGN_IN:
        return  # no cookie yet; the Origin check above is what guards it
    cookie = request.cookies.get(COOKIE)
    if cookie is None:
        raise SignInRequired
    sent = request.headers.get(CSRF_HEADER)
    if sent is None:
        sent = str((await request.form()).get(CSRF_FIELD, ""))
    if not hmac.compare_digest(sent.encode(), csrf_token(cookie).encode()):
        raise Forbidden("This form has expired or came from another page; reload the page and try again.")


def _to_sign_in(request: Request) -> Response:
    if is_htmx(request):  # htmx follows this header with a full page load
        return Response(status_code=204, headers={"hx-redirect": SIGN_IN})
    return RedirectResponse(SIGN_IN, status_code=303)


def _error_page(request: Request, status: int, message: str) -> Response:
    if is_htmx(request):  # shown in the page's message area, whatever the request meant to replace
        response = page(request, "_flash.html", status, message=message, kind="error")
        response.headers.update({"hx-retarget": "#flash", "hx-reswap": "innerHTML"})
        return response
    return page(request, "error.html", status, message=message, status=status)
