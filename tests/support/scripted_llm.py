"""A scripted OpenAI-compatible chat server for tests.

The real openai client talks to it over a loopback socket, so tests exercise the SDK's own
request encoding, SSE parsing and error mapping. It runs in the test's event loop (plain
asyncio, no threads). Every response carries `Connection: close`: one request per connection,
so a client that times out or drops a stream never leaves a half-used socket behind.

    async with ScriptedLLM() as llm:
        llm.reply("hello").reply(tool_calls=[("send_message", {"message": "hi"})])
        ...  # point a client at llm.base_url
        assert llm.requests[0]["messages"][0]["role"] == "system"

It also serves POST /v1/embeddings with deterministic bag-of-words vectors (texts sharing words point
the same way), so archives of remote embedding models (openai/text-embedding-3-small) work in tests.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import itertools
import json
import math
import re
import struct
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, Literal

MODEL_ID = "scripted-model"
# Vector sizes of the embedding models it serves when the request names no `dimensions`.
EMBEDDING_DIMS = {"text-embedding-3-small": 1536, "text-embedding-ada-002": 1536, "text-embedding-3-large": 3072}


@dataclass(frozen=True)
class _Reply:
    content: str | None
    tool_calls: tuple[tuple[str, str], ...]  # (name, arguments text)
    finish_reason: str | None
    usage: tuple[int, int] | None | Literal[False]  # False: the answer reports no usage
    reasoning: str | None
    delay: float
    drop_after: int | None  # streaming only: cut the connection after this many SSE events


@dataclass(frozen=True)
class _Failure:
    status: int
    message: str
    code: str | None
    headers: dict[str, str]


@dataclass(frozen=True)
class _Hang:
    seconds: float


@dataclass(frozen=True)
class _Malformed:
    body: str  # sent as the JSON body, or (streaming) as one SSE event's data after a good first chunk


@dataclass
class _Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes = b""


class ScriptedLLM:
    """Start with `async with ScriptedLLM() as llm:`; llm.base_url is 'http://127.0.0.1:<port>/v1'."""

    def __init__(self) -> None:
        self.requests: list[dict] = []  # every POST /v1/chat/completions body, JSON-decoded, in order
        self.request_headers: list[dict[str, str]] = []  # their headers (lower-cased names)
        self.embedding_requests: list[dict] = []  # every POST /v1/embeddings body, in order
        self.embeddings_down: set[str] = set()  # models whose embeddings answer 503 (an endpoint that is down)
        self._script: list[_Reply | _Failure | _Hang | _Malformed] = []
        self._default: _Reply | None = None
        self._responder: Callable[[dict], dict[str, Any]] | None = None
        self._call_ids = itertools.count(1)
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task] = set()
        self.base_url = ""

    # ------------------------------------------------------------ script

    def reply(
        self,
        content: str | None = None,
        *,
        tool_calls: list[tuple[str, dict | str]] = (),
        finish_reason: str | None = None,
        usage: tuple[int, int] | None | Literal[False] = None,
        reasoning: str | None = None,
        delay: float = 0.0,
        drop_after: int | None = None,
    ) -> ScriptedLLM:
        """Queue one answer. Tool-call arguments: dict → JSON, str → sent verbatim (may be malformed).
        `usage`: (prompt, completion) tokens, None for a rough count, False for none reported (as some
        providers do). `drop_after` (streaming only) closes the connection after that many SSE events."""
        self._script.append(_make_reply(content, tool_calls, finish_reason, usage, reasoning, delay, drop_after))
        return self

    def fail(self, status: int, message: str = "boom", *, code: str | None = None, headers: dict | None = None) -> ScriptedLLM:
        """Queue an error response in OpenAI's {"error": {...}} shape."""
        self._script.append(_Failure(status, message, code, dict(headers or {})))
        return self

    def hang(self, seconds: float) -> ScriptedLLM:
        """Queue a response that arrives only after `seconds` (for timeout tests)."""
        self._script.append(_Hang(seconds))
        return self

    def malformed(self, body: str = '{"id": "chatcmpl-scripted", "choices": [{"index": 0, "mess') -> ScriptedLLM:
        """Queue a 200 whose body is not valid JSON (a streaming request gets one good chunk, then an
        event whose data is `body`): a provider or proxy that garbles its answer."""
        self._script.append(_Malformed(body))
        return self

    def default(self, content: str = "ok") -> ScriptedLLM:
        """Answer this when the script is used up (otherwise: 500 "script exhausted")."""
        self._default = _Reply(content, (), None, None, None, 0.0, None)
        return self

    def respond(self, answer: Callable[[dict], dict[str, Any]]) -> ScriptedLLM:
        """When the script is used up, answer each request from its body: `answer(body)` returns
        reply()'s keyword arguments. For concurrent turns, whose requests arrive in no fixed order."""
        self._responder = answer
        return self

    def _next_step(self, body: dict) -> _Reply | _Failure | _Hang | _Malformed:
        if self._script:
            return self._script.pop(0)
        if self._responder is not None:
            return _make_reply(**self._responder(body))
        if self._default is not None:
            return self._default
        return _Failure(500, "ScriptedLLM: script exhausted (queue a reply() or set default())", None, {})

    # ------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> ScriptedLLM:
        self._server = await asyncio.start_server(self._on_connection, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.base_url = f"http://127.0.0.1:{port}/v1"
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._server is not None
        self._server.close()
        # Hanging handlers would otherwise outlive the test; cancel them.
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        await self._server.wait_closed()

    # ------------------------------------------------------------ HTTP

    async def _on_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            request = await _read_request(reader)
            if request is not None:
                await self._dispatch(request, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client went away (e.g. it timed out); nothing to answer
        except Exception as exc:  # a bug in the fake: make the test fail loudly, not hang
            await _send_json(writer, 500, _error_body(500, f"ScriptedLLM crashed: {exc!r}", None))
        finally:
            self._connections.discard(task)
            writer.close()

    async def _dispatch(self, request: _Request, writer: asyncio.StreamWriter) -> None:
        path = request.path.split("?", 1)[0].rstrip("/")
        if request.method == "GET" and path == "/v1/models":
            model = {"id": MODEL_ID, "object": "model", "created": 0, "owned_by": "scripted"}
            await _send_json(writer, 200, {"object": "list", "data": [model]})
        elif request.method == "POST" and path == "/v1/chat/completions":
            body = json.loads(request.body or b"{}")
            self.requests.append(body)
            self.request_headers.append(request.headers)
            await self._answer_chat(body, writer)
        elif request.method == "POST" and path == "/v1/embeddings":
            body = json.loads(request.body or b"{}")
            self.embedding_requests.append(body)
            await self._answer_embeddings(body, writer)
        else:
            await _send_json(writer, 404, _error_body(404, f"{request.method} {path} is not scripted", None))

    async def _answer_chat(self, body: dict, writer: asyncio.StreamWriter) -> None:
        step = self._next_step(body)
        if isinstance(step, _Hang):
            await asyncio.sleep(step.seconds)
            step = _Reply("late", (), None, None, None, 0.0, None)
        if isinstance(step, _Failure):
            await _send_json(writer, step.status, _error_body(step.status, step.message, step.code), step.headers)
            return
        if isinstance(step, _Malformed):
            await _send_malformed(writer, body, step.body)
            return
        await asyncio.sleep(step.delay)
        completion = self._completion(body, step)
        if body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            await _send_sse(writer, _chunks(completion, include_usage), step.drop_after)
        else:
            await _send_json(writer, 200, completion)

    async def _answer_embeddings(self, body: dict, writer: asyncio.StreamWriter) -> None:
        model = body.get("model", "")
        if model in self.embeddings_down:
            await _send_json(writer, 503, _error_body(503, f"ScriptedLLM: embeddings of {model!r} are down", None))
            return
        texts = [body["input"]] if isinstance(body["input"], str) else body["input"]
        dim = body.get("dimensions") or EMBEDDING_DIMS[model]
        encode = _base64_of if body.get("encoding_format") == "base64" else list  # as OpenAI answers
        data = [{"object": "embedding", "index": i, "embedding": encode(bag_of_words(t, dim))} for i, t in enumerate(texts)]
        usage = {"prompt_tokens": len(texts), "total_tokens": len(texts)}
        await _send_json(writer, 200, {"object": "list", "data": data, "model": model, "usage": usage})

    def _completion(self, body: dict, step: _Reply) -> dict:
        message: dict[str, Any] = {"role": "assistant", "content": step.content}
        if step.tool_calls:
            message["tool_calls"] = [
                {"id": f"call_{next(self._call_ids)}", "type": "function", "function": {"name": n, "arguments": a}}
                for n, a in step.tool_calls
            ]
        if step.reasoning is not None:
            message["reasoning_content"] = step.reasoning
        finish = step.finish_reason or ("tool_calls" if step.tool_calls else "stop")
        answer = {
            "id": "chatcmpl-scripted",
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model", MODEL_ID),
            "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
        }
        if step.usage is not False:
            prompt, completion = step.usage or _rough_usage(body, step)
            answer["usage"] = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
        return answer


# ---------------------------------------------------------------- wire helpers


def _base64_of(vector: list[float]) -> str:
    """A vector as OpenAI sends it when asked for base64: its float32s, little-endian."""
    return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode("ascii")


def bag_of_words(text: str, dim: int) -> list[float]:
    """A unit vector with one component per distinct word (hashed into `dim` slots); an empty text
    gets the first axis, so no vector is zero."""
    vector = [0.0] * dim
    for word in set(re.findall(r"\w+", text.lower())):
        vector[int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "big") % dim] += 1.0
    norm = math.sqrt(sum(x * x for x in vector))
    return [x / norm for x in vector] if norm else [1.0] + [0.0] * (dim - 1)


def _make_reply(
    content: str | None = None,
    tool_calls: list[tuple[str, dict | str]] = (),
    finish_reason: str | None = None,
    usage: tuple[int, int] | None | Literal[False] = None,
    reasoning: str | None = None,
    delay: float = 0.0,
    drop_after: int | None = None,
) -> _Reply:
    calls = tuple((name, args if isinstance(args, str) else json.dumps(args)) for name, args in tool_calls)
    return _Reply(content, calls, finish_reason, usage, reasoning, delay, drop_after)


def _rough_usage(body: dict, step: _Reply) -> tuple[int, int]:
    contents = [m.get("content") for m in body.get("messages") or []]
    prompt_chars = sum(len(c) for c in contents if isinstance(c, str))
    reply_chars = len(step.content or "") + sum(len(name) + len(args) for name, args in step.tool_calls)
    return max(1, prompt_chars // 4), max(1, reply_chars // 4)


def _pieces(text: str, count: int = 3) -> list[str]:
    """Split text into up to `count` non-empty consecutive pieces."""
    size = max(1, -(-len(text) // count))
    return [text[i : i + size] for i in range(0, len(text), size)]


def _chunks(completion: dict, include_usage: bool) -> list[dict]:
    """The completion as OpenAI streams it: role, reasoning/content pieces, tool-call pieces
    (index/id/name only on each call's first piece), finish_reason, then usage."""
    choice = completion["choices"][0]
    message = choice["message"]
    deltas: list[dict] = [{"role": "assistant", "content": ""}]
    deltas += [{"reasoning_content": p} for p in _pieces(message.get("reasoning_content") or "")]
    deltas += [{"content": p} for p in _pieces(message.get("content") or "")]
    for index, call in enumerate(message.get("tool_calls") or []):
        name, arguments = call["function"]["name"], call["function"]["arguments"]
        head = {"index": index, "id": call["id"], "type": "function", "function": {"name": name, "arguments": ""}}
        deltas.append({"tool_calls": [head]})
        deltas += [{"tool_calls": [{"index": index, "function": {"arguments": p}}]} for p in _pieces(arguments)]
    frame = {key: completion[key] for key in ("id", "created", "model")} | {"object": "chat.completion.chunk"}
    chunks = [frame | {"choices": [{"index": 0, "delta": d, "logprobs": None, "finish_reason": None}]} for d in deltas]
    last = {"index": 0, "delta": {}, "logprobs": None, "finish_reason": choice["finish_reason"]}
    chunks.append(frame | {"choices": [last]})
    if include_usage and "usage" in completion:
        chunks.append(frame | {"choices": [], "usage": completion["usage"]})
    return chunks


def _error_body(status: int, message: str, code: str | None) -> dict:
    kinds = {401: "authentication_error", 429: "rate_limit_error"}
    kind = "server_error" if status >= 500 else kinds.get(status, "invalid_request_error")
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


async def _read_request(reader: asyncio.StreamReader) -> _Request | None:
    line = await reader.readline()
    if not line.strip():
        return None
    method, target, _version = line.decode("latin-1").split(" ", 2)
    headers: dict[str, str] = {}
    while (raw := await reader.readline()) not in (b"\r\n", b"\n", b""):
        name, _, value = raw.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length") or 0)
    body = await reader.readexactly(length) if length else b""
    return _Request(method, target, headers, body)


def _head(status: int, content_type: str, extra: dict[str, str], length: int | None) -> bytes:
    lines = [f"HTTP/1.1 {status} {HTTPStatus(status).phrase}", f"Content-Type: {content_type}", "Connection: close"]
    lines.append(f"Content-Length: {length}" if length is not None else "Transfer-Encoding: chunked")
    lines += [f"{name}: {value}" for name, value in extra.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


async def _send_json(writer: asyncio.StreamWriter, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
    body = json.dumps(payload).encode()
    writer.write(_head(status, "application/json", headers or {}, len(body)) + body)
    await writer.drain()


async def _send_malformed(writer: asyncio.StreamWriter, request: dict, text: str) -> None:
    if not request.get("stream"):
        body = text.encode()
        writer.write(_head(200, "application/json", {}, len(body)) + body)
        await writer.drain()
        return
    writer.write(_head(200, "text/event-stream", {"Cache-Control": "no-cache"}, None))
    first = {"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "created": 0, "model": MODEL_ID}
    first["choices"] = [{"index": 0, "delta": {"role": "assistant", "content": "Hel"}, "logprobs": None, "finish_reason": None}]
    for event in (f"data: {json.dumps(first)}\n\n".encode(), f"data: {text}\n\n".encode(), b"data: [DONE]\n\n"):
        writer.write(f"{len(event):x}\r\n".encode() + event + b"\r\n")
    writer.write(b"0\r\n\r\n")
    await writer.drain()


async def _send_sse(writer: asyncio.StreamWriter, chunks: list[dict], drop_after: int | None) -> None:
    """Chunked transfer encoding, so a cut-off stream is visibly incomplete to the client."""
    writer.write(_head(200, "text/event-stream", {"Cache-Control": "no-cache"}, None))
    events = [f"data: {json.dumps(c)}\n\n".encode() for c in chunks] + [b"data: [DONE]\n\n"]
    for sent, event in enumerate(events):
        if drop_after is not None and sent >= drop_after:
            return  # the caller closes the socket without the terminating zero-size chunk
        writer.write(f"{len(event):x}\r\n".encode() + event + b"\r\n")
        await writer.drain()
    writer.write(b"0\r\n\r\n")
    await writer.drain()
