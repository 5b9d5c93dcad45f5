"""Why a document could not be read."""


class ParseError(Exception):
    """The upload cannot be read as its type; `reason` says why, for the file's `error_message`."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
