"""Who is calling. Clients send `Authorization: Bearer <key>` (what `Letta(api_key=...)` sends),
Letta's `X-BARE-PASSWORD: password <key>`, or `Authorization: Basic base64(<any user>:<key>)` (git).
The admin key acts in the default organization and may use the admin API; an organization's key acts
in its organization. With no admin key and no key in the database, the server is in local mode: every
request acts in the default organization."""

import base64
import binascii
import hmac
import time
from dataclasses import dataclass, field
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memvm.accounts import service as accounts
from memvm.accounts.key_cache import KeyCache
from memvm.actors import ADMIN_CALLER, LOCAL_CALLER, Caller
from memvm.db.tenancy import ALL_ORGANIZATIONS
from memvm.db.uow import transaction
from memvm.errors import Forbidden, Unauthenticated

# In local mode, how often to look again whether someone has created a key (the CLI can, while the
# server runs against an external database); once one exists, keys are required for good.
_RECHECK_SECONDS = 1.0


@dataclass
class Gate:
    """Per process: the admin key, and whether keys are required yet."""

    sessionmaker: async_sessionmaker[AsyncSession]
    keys: KeyCache
    admin_key: str | None
    _keys_required: bool = False
    _checked_at: float = field(default=-_RECHECK_SECONDS)

    async def keys_required(self) -> bool:
        if self.admin_key is not None or self._keys_required:
            return True
        if time.monotonic() - self._checked_at >= _RECHECK_SECONDS:
            async with transaction(self.sessionmaker, ALL_ORGANIZATIONS) as session:
                self._keys_required = await accounts.any_key_exists(session)
            self._checked_at = time.monotonic()
        return self._keys_required

    def key_created(self) -> None:
        """A key was made through this process: require keys now, not at the next re-check."""
        self._keys_required = True

    def key_revoked(self) -> None:
        self.keys.forget()

    async def caller(self, secret: str | None) -> Caller:
        if self.admin_key is not None and secret is not None and _same(secret, self.admin_key):
            return ADMIN_CALLER
        if not await self.keys_required():
            return LOCAL_CALLER
        if secret is None:
            raise Unauthenticated(
                "This server requires an API key: send `Authorization: Bearer <key>` (Letta(api_key=...)). "
                "An administrator creates keys with `memvm keys create --org NAME` or POST /v1/admin/api-keys."
            )
        caller = await self.keys.caller_of(secret)
        if caller is None:
            raise Unauthenticated("The API key is unknown or has been revoked; ask an administrator for a valid key.")
        return caller


def _same(secret: str, expected: str) -> bool:
    """Constant time; bytes, since compare_digest refuses non-ASCII text (a header may carry any)."""
    return hmac.compare_digest(secret.encode(), expected.encode())


# (header, scheme): the SDK's bearer token, Letta's own password header, and HTTP Basic, whose password
# is the key (git sends it: Letta Code as `letta:<key>`, git's credential helpers as any user).
_KEY_HEADERS = (("authorization", "bearer"), ("x-bare-password", "password"), ("authorization", "basic"))


def presented_key(request: Request) -> str | None:
    for header, expected_scheme in _KEY_HEADERS:
        scheme, _, token = request.headers.get(header, "").partition(" ")
        if scheme.lower() == expected_scheme and token.strip():
            return _basic_password(token.strip()) if expected_scheme == "basic" else token.strip()
    return None


def _basic_password(credentials: str) -> str | None:
    """The password of `base64(user:password)`; None (no key) when it is not that."""
    try:
        decoded = base64.b64decode(credentials, validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return None
    user, colon, password = decoded.partition(":")
    return password if colon and password else None


async def app_gate(request: Request) -> Gate:
    """The process's gate, which the lifespan (main.py) puts on app.state. It is here, not with the
    other app-state dependencies in api/deps.py, because authenticate needs it and deps.py needs
    authenticate."""
    gate: Gate = request.app.state.gate
    return gate


GateDep = Annotated[Gate, Depends(app_gate)]


async def authenticate(request: Request, gate: GateDep) -> Caller:
    """Every route but /v1/health/ depends on this (main.py); FastAPI runs it once per request."""
    return await gate.caller(presented_key(request))


async def require_admin(caller: Annotated[Caller, Depends(authenticate)]) -> Caller:
    if not caller.is_admin:
        raise Forbidden("The admin API needs the admin key (MEMVM_ADMIN_API_KEY); an organization's key cannot use it.")
    return caller


CallerDep = Annotated[Caller, Depends(authenticate)]
AdminDep = Annotated[Caller, Depends(require_admin)]
