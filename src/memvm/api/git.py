"""MemFS over git smart HTTP: an agent's memory as the repository `/v1/git/{agent_id}/state.git`
(what Letta Code clones, pulls and pushes). Not in the OpenAPI document: git is the client.

The protocol work (memfs/git_protocol.py, dulwich) is synchronous and runs in a worker thread; the
database work stays on the event loop. A push is one transaction: the snapshot it was checked
against, and the service's apply_push, which the worker thread calls back onto the loop once the
pack is in. A refused push rolls that transaction back and still answers 200, with git's `ng`.

dulwich loads on a process's first git request (each route imports memfs), not at its start: few
servers serve git, and its import costs a fifth of a second of CPU."""

import asyncio
import hashlib
import zlib
from typing import TYPE_CHECKING, Annotated

from fastapi import HTTPException, Query, Request, Response
from sqlalchemy.ext.asyncio import AsyncSession

from memvm.actors import Caller
from memvm.api.auth import CallerDep
from memvm.api.deps import AgentId, RuntimeDep, TransactionDep
from memvm.api.routers import api_router
from memvm.errors import InvalidInput
from memvm.memfs.recent import Recent

if TYPE_CHECKING:
    from memvm.memfs.objects import ObjectLookup
    from memvm.memfs.schemas import Refusal

router = api_router(prefix="/v1/git/{agent_id}/state.git", tags=["git"], include_in_schema=False)
Service = Annotated[str, Query(description="git-upload-pack or git-receive-pack")]


@router.get("/info/refs")
async def info_refs(agent_id: AgentId, service: Service, tx: TransactionDep) -> Response:
    from memvm.memfs import git_protocol
    from memvm.memfs import service as memfs

    if service not in git_protocol.SERVICES:
        raise InvalidInput(f"service must be git-upload-pack or git-receive-pack, not {service!r}: memvm speaks smart HTTP only.")
    async with tx() as session:
        snapshot = await memfs.snapshot(session, agent_id)
    answer = await asyncio.to_thread(git_protocol.advertisement, service, snapshot)
    return _git_answer(answer, f"application/x-{service}-advertisement")


@router.post("/git-upload-pack")
async def upload_pack(agent_id: AgentId, request: Request, runtime: RuntimeDep, tx: TransactionDep) -> Response:
    from memvm.memfs import git_protocol
    from memvm.memfs import service as memfs

    body = await _request_body(request, "git-upload-pack", runtime.settings.max_request_bytes)
    async with tx() as session:
        snapshot = await memfs.snapshot(session, agent_id)
    key = (agent_id, snapshot.head, hashlib.sha256(body).digest())
    answer = _recent_packs.get(key)
    if answer is None:
        answer = await asyncio.to_thread(git_protocol.upload_pack, snapshot, body)
        _recent_packs.put(key, answer)
    return _git_answer(answer, "application/x-git-upload-pack-result")


# The last upload-pack answers of this process. An answer depends only on the request and the head
# (everything a head reaches is immutable), and every clone by one git version sends the same
# request: so a clone of an unchanged repository is served without building the pack again.
_recent_packs: Recent[tuple[str, bytes | None, bytes], bytes] = Recent(16)


@router.post("/git-receive-pack")
async def receive_pack(
    agent_id: AgentId, request: Request, runtime: RuntimeDep, caller: CallerDep, tx: TransactionDep
) -> Response:
    from memvm.memfs import git_protocol
    from memvm.memfs import service as memfs

    body = await _request_body(request, "git-receive-pack", runtime.settings.max_request_bytes)
    try:
        async with tx() as session:
            push = _Push(session, agent_id, caller, asyncio.get_running_loop())
            snapshot = await memfs.snapshot(session, agent_id)
            answer = await asyncio.to_thread(git_protocol.receive_pack, snapshot, body, push.decide)
            if push.refused:
                raise _RolledBack(answer)
    except _RolledBack as rolled_back:
        answer = rolled_back.answer
    return _git_answer(answer, "application/x-git-receive-pack-result")


class _Push:
    """One push's ref update, decided on the event loop for the worker thread that received it."""

    def __init__(self, session: AsyncSession, agent_id: str, caller: Caller, loop: asyncio.AbstractEventLoop) -> None:
        self.session, self.agent_id, self.caller, self.loop = session, agent_id, caller, loop
        self.refused = False

    def decide(self, ref: bytes, old: bytes, new: bytes, objects: "ObjectLookup") -> "Refusal | None":
        """Runs in the worker thread, which waits while the loop applies the push."""
        return asyncio.run_coroutine_threadsafe(self._apply(old, new, objects), self.loop).result()

    async def _apply(self, old: bytes, new: bytes, objects: "ObjectLookup") -> "Refusal | None":
        from memvm.memfs import service as memfs
        from memvm.memfs.schemas import PushRefused

        try:
            await memfs.apply_push(self.session, self.agent_id, old, new, objects, actor=self.caller.actor)
        except PushRefused as refused:
            self.refused = True
            return refused.refusal
        return None


class _RolledBack(Exception):
    """Leaves the push's transaction (so it rolls back) with git's answer to the refused push."""

    def __init__(self, answer: bytes) -> None:
        super().__init__("push refused")
        self.answer = answer


async def _request_body(request: Request, service: str, cap: int) -> bytes:
    """The request's body, gunzipped when git compressed it (it does for large fetch negotiations).
    The compressed body is capped by the API's body limit (api/limits.py); the gunzipped one here."""
    expected = f"application/x-{service}-request"
    if request.headers.get("content-type") != expected:
        raise InvalidInput(f"Content-Type must be {expected}, as git sends it.")
    body = await request.body()
    if request.headers.get("content-encoding", "").lower() != "gzip":
        return body
    return await asyncio.to_thread(_gunzip, body, cap)


def _gunzip(body: bytes, cap: int) -> bytes:
    inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    try:
        data = inflater.decompress(body, cap + 1)
    except zlib.error as error:
        raise InvalidInput(f"The request body is not valid gzip ({error}); send it as git does.") from error
    if len(data) > cap:
        raise HTTPException(413, f"The gunzipped request body is over {cap} bytes (MEMVM_MAX_REQUEST_BYTES).")
    return data


def _git_answer(body: bytes, content_type: str) -> Response:
    return Response(body, media_type=content_type, headers={"Cache-Control": "no-cache"})
