"""Domain errors. The HTTP layer maps each class to a status in one table (api/errors.py).

    DomainError
    ├── NotFound            the addressed thing does not exist
    ├── Conflict            the request clashes with current state (duplicate label, …)
    ├── InvalidInput        well-formed but unacceptable input (value over limit, bad timezone, …)
    └── PreconditionFailed  If-Match named a version that is no longer current
"""


class DomainError(Exception):
    """Base class; `message` says what is wrong and how to fix it."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class NotFound(DomainError):
    pass


class Conflict(DomainError):
    pass


class InvalidInput(DomainError):
    pass


class PreconditionFailed(DomainError):
    pass
