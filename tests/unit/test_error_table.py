import inspect

from memvm import errors
from memvm.api.errors import STATUS_OF


def test_every_domain_error_has_an_http_status():
    domain_errors = [cls for _, cls in inspect.getmembers(errors, inspect.isclass) if issubclass(cls, errors.DomainError)]

    unmapped = [
        cls.__name__
        for cls in domain_errors
        if cls is not errors.DomainError and not any(issubclass(cls, mapped) for mapped in STATUS_OF)
    ]

    assert unmapped == []
