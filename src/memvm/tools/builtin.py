"""JSON schemas of the built-in tools, as the model sees them."""

from typing import Any

from memvm.llm.types import ToolSpec


def _object(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


def _string(description: str) -> dict[str, str]:
    return {"type": "string", "description": description}


_LABEL = _string("Label of the memory block to edit, as shown in your core memory (e.g. 'human').")
_NO_NUMBERS = " Never include the display-only line number prefixes (like '3→ ')."

BUILTIN_SPECS: dict[str, ToolSpec] = {
    spec.name: spec
    for spec in [
        ToolSpec(
            "send_message",
            "Send a message to the user. This ends your turn.",
            _object({"message": _string("The message text the user will read.")}, ["message"]),
        ),
        ToolSpec(
            "conversation_search",
            "Search earlier messages of this conversation (recall memory), including those no longer in your context window.",
            _object(
                {
                    "query": _string("What to look for."),
                    "roles": {
                        "type": "array",
                        "items": {"type": "string", "enum": ["user", "assistant", "tool"]},
                        "description": "Only messages with these roles.",
                    },
                    "limit": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": 50,
                        "description": "Most results to return (default 5).",
                    },
                    "start_date": _string("Only messages on or after this ISO date or datetime."),
                    "end_date": _string("Only messages on or before this ISO date or datetime."),
                    "all_conversations": {
                        "type": "boolean",
                        "description": "Search every conversation you have had, not only this one (default false).",
                    },
                },
                ["query"],
            ),
        ),
        ToolSpec(
            "core_memory_append",
            "Append text as a new line at the end of a core memory block.",
            _object({"label": _LABEL, "content": _string("Text to append." + _NO_NUMBERS)}, ["label", "content"]),
        ),
        ToolSpec(
            "core_memory_replace",
            "Replace every occurrence of some text in a core memory block. An empty new_content deletes the text.",
            _object(
                {
                    "label": _LABEL,
                    "old_content": _string("Exact text to replace." + _NO_NUMBERS),
                    "new_content": _string("Replacement text." + _NO_NUMBERS),
                },
                ["label", "old_content", "new_content"],
            ),
        ),
        ToolSpec(
            "memory_replace",
            "Replace one exact, unique occurrence of text in a memory block. Include enough surrounding text to make "
            "old_string unique. An empty new_string deletes it.",
            _object(
                {
                    "label": _LABEL,
                    "old_string": _string("Exact text to replace; must occur exactly once." + _NO_NUMBERS),
                    "new_string": _string("Replacement text." + _NO_NUMBERS),
                },
                ["label", "old_string", "new_string"],
            ),
        ),
        ToolSpec(
            "memory_insert",
            "Insert text into a memory block after a given line (0 = at the top; omit or -1 = at the end).",
            _object(
                {
                    "label": _LABEL,
                    "new_string": _string("Text to insert." + _NO_NUMBERS),
                    "insert_line": {
                        "type": "integer",
                        "description": "Line number after which to insert; 0 for the top, -1 for the end.",
                    },
                },
                ["label", "new_string"],
            ),
        ),
        ToolSpec(
            "memory_rethink",
            "Rewrite a memory block completely with new, reorganized content. Use it for large restructurings, not small edits.",
            _object(
                {"label": _LABEL, "new_memory": _string("The complete new content of the block." + _NO_NUMBERS)},
                ["label", "new_memory"],
            ),
        ),
        ToolSpec(
            "archival_memory_insert",
            "Store a piece of text in archival memory: long-term storage outside your context window, searchable "
            "by meaning later. Write self-contained text; add tags to group related entries.",
            _object(
                {
                    "content": _string("The text to store."),
                    "tags": {"type": "array", "items": {"type": "string"}, "description": "Optional tags."},
                },
                ["content"],
            ),
        ),
        ToolSpec(
            "archival_memory_search",
            "Search archival memory by meaning. Returns the closest passages with their relevance, timestamps and tags.",
            _object(
                {
                    "query": _string("What to look for, in natural language."),
                    "tags": {"type": "array", "items": {"type": "string"}, "description": "Only passages with these tags."},
                    "tag_match_mode": {
                        "type": "string",
                        "enum": ["any", "all"],
                        "description": "any (default): at least one tag; all: every tag.",
                    },
                    "top_k": {"type": "integer", "minimum": 1, "maximum": 50, "description": "How many results (default 5)."},
                    "start_datetime": _string("Only passages created at or after this ISO date or datetime."),
                    "end_datetime": _string("Only passages created at or before this ISO date or datetime."),
                },
                ["query"],
            ),
        ),
        ToolSpec("memory_finish_edits", "Call when you have finished editing memory. Ends your turn.", _object({}, [])),
        ToolSpec(
            "memory_apply_patch",
            "Apply a diff to memory. Single block: pass `label` and hunks separated by '@@', with ' ' context, '-' "
            "removed and '+' added lines. Several blocks: omit `label` and use '*** Add Block: L', "
            "'*** Update Block: L', '*** Delete Block: L' and '*** Move to: NEW' sections.",
            _object(
                {"label": _string("Block to patch (single-block mode)."), "patch": _string("The patch text." + _NO_NUMBERS)},
                ["patch"],
            ),
        ),
        ToolSpec(
            "memory",
            "Manage memory blocks as files. Paths look like '/memories/<label>'. Commands: view (a block with line "
            "numbers, or the list of blocks when path is '/memories'), create (path, description, optional file_text), "
            "str_replace (path, old_string, new_string), insert (path, insert_text, optional insert_line), delete (path), "
            "rename (old_path + new_path, or path + description to change the description).",
            _object(
                {
                    "command": {"type": "string", "enum": ["view", "create", "str_replace", "insert", "delete", "rename"]},
                    "path": _string("Path of the block, e.g. /memories/human."),
                    "file_text": _string("Initial content for create." + _NO_NUMBERS),
                    "description": _string("Description for create, or the new description for rename."),
                    "old_string": _string("Exact text to replace (str_replace)." + _NO_NUMBERS),
                    "new_string": _string("Replacement text (str_replace)." + _NO_NUMBERS),
                    "insert_line": {"type": "integer", "description": "Insert after this line (0 = top, -1 or omitted = end)."},
                    "insert_text": _string("Text to insert (insert)." + _NO_NUMBERS),
                    "old_path": _string("Current path (rename)."),
                    "new_path": _string("New path (rename)."),
                },
                ["command"],
            ),
        ),
        ToolSpec(
            "open_files",
            "Open files of your folders into your context (the <directories> section), whole or a range of lines, "
            "closing the least recently used ones beyond your limit of open files. Names are as listed there, e.g. "
            "'docs/guide.md'.",
            _object(
                {
                    "file_requests": {
                        "type": "array",
                        "minItems": 1,
                        "items": _object(
                            {
                                "file_name": _string("The file's name, including its folder: 'folder/file.ext'."),
                                "offset": {
                                    "type": "integer",
                                    "minimum": 0,
                                    "description": "First line to show, 0-based (0 = line 1).",
                                },
                                "length": {
                                    "type": "integer",
                                    "minimum": 1,
                                    "description": "How many lines to show (default: to the end).",
                                },
                            },
                            ["file_name"],
                        ),
                        "description": "The files to open, each with an optional line range.",
                    },
                    "close_all_others": {"type": "boolean", "description": "Close every other open file first (default false)."},
                },
                ["file_requests"],
            ),
        ),
        ToolSpec(
            "grep_files",
            "Search the lines of your folders' files for a regular expression (case-insensitive). Shows 20 matches a "
            "call with file:line and context, after a summary of the matches per file; pass offset for the next page.",
            _object(
                {
                    "pattern": _string(
                        "Keyword or regular expression to find in the files' lines (PostgreSQL syntax; \\b works)."
                    ),
                    "include": _string("Only files whose name matches this regex or glob, e.g. '*.py' or 'docs/'."),
                    "context_lines": {
                        "type": "integer",
                        "minimum": 0,
                        "description": "Lines of context before and after each match (default 1).",
                    },
                    "offset": {"type": "integer", "minimum": 0, "description": "Matches to skip: 0 first page, 20 the next."},
                },
                ["pattern"],
            ),
        ),
        ToolSpec(
            "semantic_search_files",
            "Search your folders' files by meaning and keywords. Returns the best passages with file:lines.",
            _object(
                {
                    "query": _string("What to look for, in natural language."),
                    "limit": {"type": "integer", "minimum": 1, "maximum": 50, "description": "How many passages (default 5)."},
                },
                ["query"],
            ),
        ),
        ToolSpec(
            "web_search",
            "Search the web. Returns the top results as JSON: title, url and a snippet of each.",
            _object(
                {
                    "query": _string("What to search for."),
                    "num_results": {"type": "integer", "minimum": 1, "maximum": 20, "description": "Results wanted (default 5)."},
                },
                ["query"],
            ),
        ),
        ToolSpec(
            "fetch_webpage",
            "Fetch a web page (http or https) and return its readable text.",
            _object({"url": _string("The page's full URL, e.g. https://example.com/docs.")}, ["url"]),
        ),
    ]
}

# Calling one of these ends the turn (MemGPT-style agents).
TERMINAL_TOOLS = frozenset({"send_message", "memory_finish_edits"})

TOOL_TYPES = {
    "send_message": "letta_core",
    "conversation_search": "letta_core",
    "core_memory_append": "letta_memory_core",
    "core_memory_replace": "letta_memory_core",
    "memory_replace": "letta_sleeptime_core",  # as Letta 0.16.8 types them (its export says so)
    "memory_insert": "letta_sleeptime_core",
    "memory": "letta_memory_core",
    "memory_apply_patch": "letta_memory_core",
    "memory_rethink": "letta_sleeptime_core",
    "memory_finish_edits": "letta_sleeptime_core",
    "archival_memory_insert": "letta_core",
    "archival_memory_search": "letta_core",
    "open_files": "letta_files_core",
    "grep_files": "letta_files_core",
    "semantic_search_files": "letta_files_core",
    "web_search": "letta_builtin",
    "fetch_webpage": "letta_builtin",
}

# Built-ins that reach the network: they run before the step's transaction opens, as custom tools do.
WEB_TOOLS = frozenset({"web_search", "fetch_webpage"})

# Tool arguments whose text must be embedded before the step's transaction opens.
EMBEDDED_ARGUMENTS = {"archival_memory_insert": "content", "archival_memory_search": "query", "conversation_search": "query"}
# ... embedded with each embedding model of the agent's folders instead of the agent's own.
FOLDER_EMBEDDED_ARGUMENTS = {"semantic_search_files": "query"}
# Attached while the agent has a folder (Letta's files tools).
FILE_TOOLS = ("open_files", "grep_files", "semantic_search_files")

DEFAULT_TOOLS = {
    "letta_v1_agent": ("conversation_search", "memory_replace", "memory_insert"),
    "memgpt_v2_agent": ("send_message", "conversation_search", "memory_replace", "memory_insert"),
    "memgpt_agent": (
        "send_message",
        "conversation_search",
        "core_memory_append",
        "core_memory_replace",
        "memory",
        "memory_apply_patch",
    ),
    "sleeptime_agent": ("memory_replace", "memory_insert", "memory_rethink", "memory_finish_edits"),
    "react_agent": (),
    "workflow_agent": (),
}

# MemGPT-style agents continue only when asked to (request_heartbeat) or after a memory tool.
HEARTBEAT_AGENT_TYPES = frozenset({"memgpt_v2_agent", "memgpt_agent", "sleeptime_agent"})
HEARTBEAT_PARAM = {
    "type": "boolean",
    "description": "Set true to get control back after this call (to call another tool or answer); false ends your turn.",
}


def with_heartbeat(spec: ToolSpec) -> ToolSpec:
    """The spec as MemGPT-style agents see it: every non-terminal tool takes `request_heartbeat`."""
    if spec.name in TERMINAL_TOOLS:
        return spec
    parameters = dict(spec.parameters)
    parameters["properties"] = {**parameters["properties"], "request_heartbeat": HEARTBEAT_PARAM}
    parameters["required"] = [*parameters["required"], "request_heartbeat"]
    return ToolSpec(spec.name, spec.description, parameters)
