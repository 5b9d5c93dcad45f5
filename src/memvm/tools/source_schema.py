"""A custom tool's JSON schema, derived from its Python source the way Letta derives it: the
function's name, its docstring's description, and one property per parameter with the type of its
annotation and the description from the Google-style `Args:` section. The source is parsed, never
run (pure: no I/O)."""

import ast
import functools
import re
from typing import Any

from memvm.errors import InvalidInput

# Parameters the server supplies, never the model.
SUPPLIED_BY_SERVER = frozenset({"self", "cls", "agent_state", "request_heartbeat"})
_SCALARS = {"str": "string", "int": "integer", "float": "number", "bool": "boolean"}
_CONTAINERS = {"list": "array", "List": "array", "tuple": "array", "set": "array", "dict": "object", "Dict": "object"}
_SECTION = re.compile(r"^(Args|Arguments|Parameters|Returns|Return|Raises|Yields|Examples?|Notes?):\s*$")
_ARG_LINE = re.compile(r"^(\*{0,2}\w+)\s*(\([^)]*\))?\s*:\s*(.*)$")


def derive_schema(source_code: str, name: str | None = None) -> dict[str, Any]:
    """{"name", "description", "parameters"} of the function `name`, or of the last top-level one."""
    function = _function(source_code, name)
    description, argument_docs = parse_docstring(ast.get_docstring(function) or "")
    properties: dict[str, Any] = {}
    required: list[str] = []
    arguments = function.args
    if arguments.vararg or arguments.kwarg:
        raise InvalidInput(f"Function {function.name!r} takes *args or **kwargs; give every parameter a name and a type.")
    positional = [*arguments.posonlyargs, *arguments.args]
    defaults = {arg.arg for arg in positional[len(positional) - len(arguments.defaults) :]}
    defaults |= {arg.arg for arg, default in zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True) if default is not None}
    for arg in [*positional, *arguments.kwonlyargs]:
        if arg.arg in SUPPLIED_BY_SERVER:
            continue
        if arg.annotation is None:
            raise InvalidInput(
                f"Parameter {arg.arg!r} of {function.name!r} has no type annotation; annotate it, e.g. `{arg.arg}: str`."
            )
        schema = annotation_schema(arg.annotation, f"{function.name}({arg.arg})")
        if arg.arg in argument_docs:
            schema["description"] = argument_docs[arg.arg]
        properties[arg.arg] = schema
        if arg.arg not in defaults:
            required.append(arg.arg)
    return {
        "name": function.name,
        "description": description,
        "parameters": {"type": "object", "properties": properties, "required": required},
    }


@functools.lru_cache(maxsize=1024)
def takes_agent_state(source_code: str, name: str) -> bool:
    """Whether the tool wants the agent's read-only snapshot (Letta's `agent_state` parameter).
    Cached: every turn asks it of every attached custom tool, and a source never changes its answer."""
    function = _function(source_code, name)
    arguments = function.args
    return any(arg.arg == "agent_state" for arg in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs])


def _function(source_code: str, name: str | None) -> ast.FunctionDef | ast.AsyncFunctionDef:
    try:
        tree = ast.parse(source_code)
    except SyntaxError as error:
        raise InvalidInput(f"source_code is not valid Python: {error.msg} (line {error.lineno}).") from None
    functions = [node for node in tree.body if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)]
    if not functions:
        raise InvalidInput("source_code defines no function; define the tool as a top-level `def`.")
    if name is None:
        return functions[-1]
    named = [function for function in functions if function.name == name]
    if not named:
        raise InvalidInput(f"source_code has no function named {name!r}; it defines {', '.join(f.name for f in functions)}.")
    return named[-1]


def annotation_schema(node: ast.expr, where: str) -> dict[str, Any]:
    """The JSON schema of a type annotation: scalars, list/dict (and typing's), Optional/`| None`,
    Union and Literal."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):  # a quoted annotation
        return annotation_schema(ast.parse(node.value, mode="eval").body, where)
    name = _name(node)
    if name in _SCALARS:
        return {"type": _SCALARS[name]}
    if name in _CONTAINERS:
        return {"type": _CONTAINERS[name]}
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _union([node.left, node.right], where)
    if isinstance(node, ast.Subscript):
        outer = _name(node.value)
        inner = list(node.slice.elts) if isinstance(node.slice, ast.Tuple) else [node.slice]
        if outer in ("Optional", "Union"):
            return _union(inner, where)
        if outer == "Literal":
            return _literal(inner, where)
        if outer in _CONTAINERS and _CONTAINERS[outer] == "array":
            return {"type": "array", "items": annotation_schema(inner[0], where)}
        if outer in _CONTAINERS:
            return {"type": "object"}
    raise InvalidInput(
        f"The type of {where} ({ast.unparse(node)}) cannot be described to the model; "
        "use str, int, float, bool, list[...], dict, Optional[...] or Literal[...]."
    )


def _name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):  # typing.List, typing.Optional, …
        return node.attr
    return None


def _union(members: list[ast.expr], where: str) -> dict[str, Any]:
    """Optional[X] and X | None describe X (the parameter just becomes optional to pass)."""
    kept = [member for member in members if not _is_none(member)]
    schemas = [annotation_schema(member, where) for member in kept]
    return schemas[0] if len(schemas) == 1 else {"anyOf": schemas}


def _is_none(node: ast.expr) -> bool:
    return (isinstance(node, ast.Constant) and node.value is None) or _name(node) == "None"


def _literal(values: list[ast.expr], where: str) -> dict[str, Any]:
    constants = [value.value for value in values if isinstance(value, ast.Constant)]
    kinds = {type(constant).__name__ for constant in constants}
    if len(constants) != len(values) or len(kinds) != 1 or next(iter(kinds)) not in _SCALARS:
        raise InvalidInput(f"The Literal of {where} must list constants of one type (str, int, float or bool).")
    return {"type": _SCALARS[next(iter(kinds))], "enum": constants}


def parse_docstring(docstring: str) -> tuple[str, dict[str, str]]:
    """The description (everything before the first section) and each argument's description from
    a Google-style `Args:` section; continuation lines are joined."""
    description: list[str] = []
    arguments: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    for raw in docstring.splitlines():
        line = raw.strip()
        header = _SECTION.match(line)
        if header:
            section, current = header.group(1), None
        elif section is None:
            description.append(line)
        elif section in ("Args", "Arguments", "Parameters") and line:
            match = _ARG_LINE.match(line)
            if match and not raw.startswith(" " * 8):
                current = match.group(1).lstrip("*")
                arguments[current] = match.group(3).strip()
            elif current is not None:
                arguments[current] = f"{arguments[current]} {line}".strip()
    return " ".join(part for part in description if part).strip(), arguments
