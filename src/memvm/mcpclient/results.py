"""The SDK's answers as the port's plain values: a tool of `tools/list`, a `tools/call` result as
text (text parts joined, every other part described in one line)."""

import json

from mcp import types

from memvm.mcpclient.types import CallResult, RemoteTool


def remote_tool(tool: types.Tool) -> RemoteTool:
    return RemoteTool(name=tool.name, description=tool.description or "", input_schema=dict(tool.input_schema))


def call_result(result: types.CallToolResult) -> CallResult:
    """structuredContent only when there is no text: a text part usually says the same."""
    lines = [_part_text(part) for part in result.content]
    has_text = any(isinstance(part, types.TextContent) for part in result.content)
    if not has_text and result.structured_content is not None:
        lines.insert(0, json.dumps(result.structured_content, ensure_ascii=False))
    return CallResult(text="\n".join(lines), is_error=bool(result.is_error))


def error_result(error_message: str) -> CallResult:
    """The server answered the call with a JSON-RPC error (an unknown tool, bad arguments)."""
    return CallResult(text=f"Error: {error_message}", is_error=True)


def _part_text(part: types.ContentBlock) -> str:
    if isinstance(part, types.TextContent):
        return part.text
    if isinstance(part, types.ImageContent | types.AudioContent):
        kind = "image" if isinstance(part, types.ImageContent) else "audio"
        return f"[{kind}: {part.mime_type}, {_decoded_size(part.data)} bytes]"
    if isinstance(part, types.EmbeddedResource):
        return _resource_text(part.resource)
    if isinstance(part, types.ResourceLink):
        return f"[resource link: {part.uri}{f', {part.mime_type}' if part.mime_type else ''}]"
    return f"[{getattr(part, 'type', type(part).__name__)} content]"


def _resource_text(resource: types.TextResourceContents | types.BlobResourceContents) -> str:
    mime = f", {resource.mime_type}" if resource.mime_type else ""
    if isinstance(resource, types.TextResourceContents):
        return f"[resource: {resource.uri}{mime}, {len(resource.text)} characters]"
    return f"[resource: {resource.uri}{mime}, {_decoded_size(resource.blob)} bytes]"


def _decoded_size(base64_text: str) -> int:
    """Without decoding it: four characters carry three bytes, less the padding."""
    return len(base64_text) * 3 // 4 - base64_text[-2:].count("=")
