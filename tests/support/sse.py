"""Reading Server-Sent Events the way the Letta SDK does."""

import json


def parse_sse(text: str) -> list[dict]:
    """Events as dicts; `[DONE]` becomes {"done": True}; an `event: error` marks its data with "_event"."""
    events = []
    for frame in text.strip().split("\n\n"):
        name, data = None, None
        for line in frame.splitlines():
            if line.startswith("event: "):
                name = line[len("event: ") :]
            elif line.startswith("data: "):
                data = line[len("data: ") :]
        if data == "[DONE]":
            events.append({"done": True})
        elif data is not None:
            event = json.loads(data)
            if name:
                event["_event"] = name
            events.append(event)
    return events
