"""The built-in web tools, `fetch_webpage` and `web_search`. They run in the server process (they
need no code of the user's, so no sandbox), before the step's transaction opens as custom calls do,
under the operator's settings (`MEMVM_WEB_*`). The model chooses the URL, so a fetch goes only to
public addresses unless the operator allows private ones: it must not reach the server's own network."""

import asyncio
import ipaddress
import json
import socket
from dataclasses import dataclass
from typing import Any

import httpx

from memvm.config import Settings
from memvm.files.parsing.html import page_text
from memvm.llm.types import ToolCall
from memvm.runtime.tools.arguments import check_names, parse_arguments
from memvm.runtime.tools.outcome import ToolOutcome, clip
from memvm.tools.builtin import BUILTIN_SPECS
from memvm.tools.schemas import RETURN_CHAR_LIMIT

MAX_REDIRECTS = 5
DEFAULT_RESULTS = 5
_HEADERS = {"user-agent": "memvm-fetch_webpage", "accept": "text/html, text/plain;q=0.9, */*;q=0.5"}


class WebToolError(Exception):
    """A web tool's call failed in a way the model can read and act on."""


@dataclass(frozen=True)
class WebTools:
    allow_private: bool
    timeout: float
    max_bytes: int
    search_url: str | None

    @classmethod
    def of(cls, settings: Settings) -> "WebTools":
        return cls(
            allow_private=settings.web_fetch_allow_private,
            timeout=settings.web_fetch_timeout_seconds,
            max_bytes=settings.web_fetch_max_bytes,
            search_url=settings.web_search_url,
        )

    async def run(self, call: ToolCall) -> ToolOutcome:
        """The outcome of one call of a web tool: its text, or an error result that says why."""
        try:
            arguments = parse_arguments(call)
            heartbeat = bool(arguments.pop("request_heartbeat", False))
            parameters = BUILTIN_SPECS[call.name].parameters
            check_names(call.name, arguments, parameters["properties"], parameters["required"])
        except ValueError as error:
            return ToolOutcome.invalid(str(error))
        try:
            async with asyncio.timeout(self.timeout):
                text = await (self.fetch_webpage(arguments) if call.name == "fetch_webpage" else self.web_search(arguments))
        except TimeoutError:
            return ToolOutcome("error", f"{call.name}: no answer within {self.timeout:g} s.", heartbeat=heartbeat)
        except (WebToolError, httpx.HTTPError) as error:  # some of httpx's errors have no text: the name says it
            return ToolOutcome("error", f"{call.name}: {error or type(error).__name__}", heartbeat=heartbeat)
        return ToolOutcome("success", clip(text, RETURN_CHAR_LIMIT), heartbeat=heartbeat)

    async def fetch_webpage(self, arguments: dict[str, Any]) -> str:
        """The page's readable text. Redirects are followed by hand, so each hop's address is checked."""
        url = _text_argument(arguments, "url")
        async with httpx.AsyncClient(timeout=self.timeout, follow_redirects=False, trust_env=False) as client:
            for _ in range(MAX_REDIRECTS + 1):
                target = await self._checked(url)
                async with client.stream("GET", target, headers=_HEADERS) as response:
                    if response.is_redirect and "location" in response.headers:
                        url = str(target.join(response.headers["location"]))
                        continue
                    if response.status_code >= 400:
                        raise WebToolError(f"{target} answered HTTP {response.status_code}.")
                    return _readable(response, await _capped_body(response, self.max_bytes))
        raise WebToolError(f"more than {MAX_REDIRECTS} redirects.")

    async def web_search(self, arguments: dict[str, Any]) -> str:
        """The backend's top results as JSON: [{title, url, content}]."""
        query = _text_argument(arguments, "query")
        wanted = arguments.get("num_results", DEFAULT_RESULTS)
        if not isinstance(wanted, int) or isinstance(wanted, bool) or not 1 <= wanted <= 20:
            raise WebToolError("num_results must be an integer from 1 to 20.")
        if self.search_url is None:
            raise WebToolError(
                "web search is not configured on this server. Its operator enables it by setting "
                "MEMVM_WEB_SEARCH_URL to a SearxNG-style JSON search endpoint (e.g. http://127.0.0.1:8888/search)."
            )
        async with httpx.AsyncClient(timeout=self.timeout, trust_env=False) as client:
            response = await client.get(self.search_url, params={"q": query, "format": "json"})
        if response.status_code >= 400:
            raise WebToolError(f"the search backend answered HTTP {response.status_code}.")
        try:
            results = response.json()["results"]
            found = [{"title": r.get("title"), "url": r.get("url"), "content": r.get("content")} for r in results[:wanted]]
        except (ValueError, KeyError, TypeError, AttributeError):
            raise WebToolError("the search backend's answer is not SearxNG-style JSON ({'results': [...]}).") from None
        return json.dumps(found, ensure_ascii=False)

    async def _checked(self, url: str) -> httpx.URL:
        """The URL, if it is http(s) and (unless allowed) every address its host resolves to is public."""
        try:
            target = httpx.URL(url)
        except httpx.InvalidURL as error:
            raise WebToolError(f"{url!r} is not a URL ({error}).") from None
        if target.scheme not in ("http", "https") or not target.host:
            raise WebToolError(f"only http:// and https:// URLs can be fetched, not {url!r}.")
        if not self.allow_private:
            for address in await _addresses(target.host, target.port or (443 if target.scheme == "https" else 80)):
                if not address.is_global or address.is_multicast:
                    raise WebToolError(
                        f"{target.host} is a non-public address ({address}); this server fetches public addresses only "
                        "(its operator can allow others with MEMVM_WEB_FETCH_ALLOW_PRIVATE=true)."
                    )
        return target


async def _addresses(host: str, port: int) -> list[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as error:
        raise WebToolError(f"cannot resolve {host} ({error.strerror}).") from None
    addresses = [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos]
    # An IPv4 address written as IPv6 (::ffff:127.0.0.1) is judged as the IPv4 address it is.
    return [a.ipv4_mapped if isinstance(a, ipaddress.IPv6Address) and a.ipv4_mapped else a for a in addresses]


def _text_argument(arguments: dict[str, Any], name: str) -> str:
    value = arguments.get(name)
    if not isinstance(value, str) or not value.strip():
        raise WebToolError(f"{name} must be a non-empty string.")
    return value.strip()


async def _capped_body(response: httpx.Response, max_bytes: int) -> bytes:
    """At most max_bytes of the body: a larger page is cut there, not read whole."""
    body = bytearray()
    async for chunk in response.aiter_bytes():
        body += chunk
        if len(body) >= max_bytes:
            return bytes(body[:max_bytes])
    return bytes(body)


def _readable(response: httpx.Response, body: bytes) -> str:
    kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind and not (kind.startswith("text/") or kind in ("application/json", "application/xhtml+xml", "application/xml")):
        raise WebToolError(f"{response.url} is {kind}, not a text page.")
    text = body.decode(response.encoding or "utf-8", errors="replace")
    return page_text(text) if kind in ("text/html", "application/xhtml+xml") or not kind else text
