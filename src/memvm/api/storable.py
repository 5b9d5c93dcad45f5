"""Input memvm cannot store, refused before a route runs, with a 422 that names where it is:

- a NUL character (U+0000, which PostgreSQL's `text` and `jsonb` cannot hold) or a lone surrogate
  (U+D800–U+DFFF outside a pair, which has no UTF-8 form), anywhere in the path, the query string, a
  JSON body (keys included) or a URL-encoded form (the console's);
- a JSON body nested deeper than MAX_JSON_DEPTH objects and arrays, which could be parsed but not
  written back out (to the database's `jsonb` or to a response) without exhausting the stack;
- a number in a JSON body that is not finite: Python's json reads `NaN` and `Infinity` and turns a
  number beyond the float range (`1e400`) into infinity, none of which PostgreSQL's `json` and `jsonb`
  accept.

Without this check such input gets as far as the database and fails there, as a 500, after the route
may already have called a model. One rule for every route rather than a validator on every field:
free-form fields (`metadata`, tool arguments, `json_schema`) are dicts of anything, and a new field
cannot forget it."""

import math
import re
from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError

MAX_JSON_DEPTH = 100
# Only in these escapes can a JSON body carry such a character (a raw control character or invalid
# UTF-8 is already malformed JSON, a 400).
_SUSPECT_ESCAPE = re.compile(rb"\\u(?:0000|[dD][89a-fA-F])")
# Only as these tokens can it carry a number that is not finite: NaN, Infinity, an exponent of three
# digits or more, or 210 digits or more before the point (with at most two exponent digits, fewer stay
# below 1.8e308). They are looked for in the body with every digit read as 0: substring searches, a
# few times faster than one regular expression.
_DIGITS_AS_ZERO = bytes.maketrans(b"0123456789E", b"0000000000e")
_NON_FINITE_TOKENS = (b"NaN", b"Infinity", b"0e000", b"0e+000", b"0" * 210)
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


async def storable_input(request: Request) -> None:
    problems = [
        problem
        for location, values in (("path", request.path_params.items()), ("query", request.query_params.multi_items()))
        for name, value in values
        if (problem := _problem(value, (location, name))) is not None
    ]
    if _is_json(request.headers.get("content-type", "")) and _suspect(await request.body()):
        try:
            body = await request.json()  # already parsed (and cached) by FastAPI for the route's body
        except ValueError:
            body = None  # not JSON: the route's own parsing says so
        problems += _walk(body)
    if request.headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
        fields = (await request.form()).multi_items()
        problems += [p for name, value in fields if isinstance(value, str) and (p := _problem(value, ("form", name)))]
    if problems:
        raise RequestValidationError(problems)


def _is_json(content_type: str) -> bool:
    """FastAPI's rule for a JSON body: no content type, or a JSON one (not a multipart upload, which streams)."""
    media_type = content_type.partition(";")[0].strip().lower()
    return not media_type or media_type == "application/json" or media_type.endswith("+json")


def _suspect(body: bytes) -> bool:
    """Whether the body may hold something to refuse; bodies with none of it (most) are not walked."""
    if body.count(b"{") + body.count(b"[") > MAX_JSON_DEPTH or _SUSPECT_ESCAPE.search(body) is not None:
        return True
    shape = body.translate(_DIGITS_AS_ZERO)
    return any(token in shape for token in _NON_FINITE_TOKENS)


def _walk(document: Any) -> list[dict[str, Any]]:
    """Every string in a JSON document (keys too), and its depth, without recursion: a deep document
    must not exhaust the stack here."""
    problems: list[dict[str, Any]] = []
    pending: list[tuple[Any, tuple[str | int, ...], int]] = [(document, ("body",), 0)]
    while pending:
        value, location, depth = pending.pop()
        if isinstance(value, str):
            problem = _problem(value, location)
            if problem is not None:
                problems.append(problem)
        elif isinstance(value, float) and not math.isfinite(value):
            problems.append(_non_finite(location))
        elif isinstance(value, dict | list) and depth == MAX_JSON_DEPTH:
            message = f"nested deeper than {MAX_JSON_DEPTH} levels of objects and arrays; send a flatter document"
            where = location if len(location) <= 6 else (*location[:5], "…")
            problems.append({"type": "too_deep", "loc": where, "msg": message, "input": None})
        elif isinstance(value, dict):
            for key, item in value.items():
                problem = _problem(key, location, "a key")
                if problem is not None:
                    problems.append(problem)
                pending.append((item, (*location, key), depth + 1))
        elif isinstance(value, list):
            pending.extend((item, (*location, index), depth + 1) for index, item in enumerate(value))
    return problems


def _problem(text: str, location: tuple[str | int, ...], subject: str = "the text") -> dict[str, Any] | None:
    found = _UNSTORABLE.search(text)
    if found is None:
        return None
    character = found.group()
    what = "a NUL character (\\u0000)" if character == "\x00" else f"a lone surrogate (\\u{ord(character):04x})"
    return {
        "type": "unstorable_text",
        "loc": location,
        "msg": f"{subject} contains {what} at position {found.start()}, which cannot be stored; remove it",
        "input": text,
    }


def _non_finite(location: tuple[str | int, ...]) -> dict[str, Any]:
    return {
        "type": "finite_number",
        "loc": location,
        "msg": "the number is not finite (NaN, Infinity, or beyond ±1.8e308), which cannot be stored; send a finite number",
        "input": None,
    }
