"""Domain errors. The HTTP layer maps each class to a status in one table (api/errors.py).

DomainError
├── Unauthenticated     no key, or an unknown or revoked one
├── Forbidden           a valid key that may not do this (an organization key on the admin API)
├── NotFound            the addressed thing does not exist (or belongs to another organization)
├── Conflict            the request clashes with current state (duplicate label, …)
├── InvalidInput        well-formed but unacceptable input (bad label, bad timezone, …)
│   └── LimitExceeded   a block value over its character limit, or a limit below the value's length
├── PreconditionFailed  If-Match named a version that is no longer current
├── Busy                the agent is running another turn and the wait ran out
├── MemoryEditError     an edit that cannot apply to the block as it is (shown to the model)
├── Unavailable         this server cannot do it as configured (no sandbox for custom tools)
├── Overloaded          every pooled database connection stayed in use for the whole wait (retry)
├── UnsupportedMediaType  an uploaded file of a type this server cannot read
├── TooLarge            an uploaded file over the server's size limit
├── CloudOnly           a Letta Cloud feature memvm does not serve (templates, schedules, …)
└── LLMError            the model provider failed (after retries)
    ├── LLMTimeout
    ├── LLMUnavailable      5xx / 429 / connection errors
    ├── LLMRejected         4xx other than 429: bad request, auth, unknown model
    └── ContextWindowExceeded  the provider says the prompt is too long
"""


class DomainError(Exception):
    """Base class; `message` says what is wrong and how to fix it."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class Unauthenticated(DomainError):
    pass


class Forbidden(DomainError):
    pass


class NotFound(DomainError):
    pass


class Conflict(DomainError):
    pass


class InvalidInput(DomainError):
    pass


class LimitExceeded(InvalidInput):
    """A block value longer than its limit, or a limit below its value's length. Still an
    InvalidInput for `except InvalidInput`, but answered 422 (the SDK's UnprocessableEntityError),
    as Letta answers a block over its limit in a request body."""


class PreconditionFailed(DomainError):
    pass


class Busy(DomainError):
    pass


class MemoryEditError(DomainError):
    pass


class Unavailable(DomainError):
    pass


class Overloaded(DomainError):
    """This process is running all the work its connection pools allow and none ended in time: worth
    a retry, unlike Unavailable."""


class UnsupportedMediaType(DomainError):
    pass


class TooLarge(DomainError):
    pass


class CloudOnly(DomainError):
    pass


class LLMError(DomainError):
    pass


class LLMTimeout(LLMError):
    pass


class LLMUnavailable(LLMError):
    pass


class LLMRejected(LLMError):
    pass


class ContextWindowExceeded(LLMError):
    pass
