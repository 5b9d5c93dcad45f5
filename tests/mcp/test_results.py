"""A tools/call answer as text: text parts joined, other parts one line each, structured content
only when there is no text."""

import base64

from mcp import types

from memvm.mcpclient.results import call_result

PNG = base64.b64encode(b"\x89PNG" + bytes(1230)).decode()


def test_text_parts_are_joined_and_other_parts_described():
    result = types.CallToolResult(
        content=[
            types.TextContent(type="text", text="first"),
            types.ImageContent(type="image", data=PNG, mime_type="image/png"),
            types.AudioContent(type="audio", data=base64.b64encode(b"abcde").decode(), mime_type="audio/wav"),
            types.EmbeddedResource(
                type="resource", resource=types.TextResourceContents(uri="file:///a.txt", mime_type="text/plain", text="hello")
            ),
            types.ResourceLink(type="resource_link", name="b", uri="file:///b.bin"),
            types.TextContent(type="text", text="last"),
        ],
        structured_content={"ignored": True},
    )

    converted = call_result(result)

    assert converted.text.splitlines() == [
        "first",
        "[image: image/png, 1234 bytes]",
        "[audio: audio/wav, 5 bytes]",
        "[resource: file:///a.txt, text/plain, 5 characters]",
        "[resource link: file:///b.bin]",
        "last",
    ]
    assert converted.is_error is False


def test_structured_content_without_text_is_json():
    result = types.CallToolResult(content=[], structured_content={"uid": 7}, is_error=True)

    converted = call_result(result)

    assert (converted.text, converted.is_error) == ('{"uid": 7}', True)
