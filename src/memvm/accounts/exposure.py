"""Whether a server may listen where it is asked to: never unauthenticated beyond this machine
unless the operator insists (--insecure). `memvm serve` checks it before anything listens; the app
checks it again as it starts, and logs which mode is on."""

import ipaddress
import logging

from memvm.config import Settings


class ExposureRefused(RuntimeError):
    """The server would be reachable beyond this machine without authentication."""


def check_exposure(settings: Settings, keys_required: bool) -> tuple[int, str]:
    """Refuse to serve an unauthenticated server beyond this machine; the log level and line that
    say which mode is on."""
    if keys_required:
        return logging.INFO, "authentication on: every route but /v1/health/ needs an API key"
    if is_loopback(settings.host):
        return logging.INFO, (
            "authentication off (local mode): no admin key and no API keys; every request acts in the default organization"
        )
    if not settings.insecure:
        raise ExposureRefused(
            f"Refusing to listen on {settings.host} without authentication: anyone who reaches it could read and "
            "rewrite every agent's memory. Set MEMVM_ADMIN_API_KEY (e.g. to the output of "
            "`python3 -c 'import secrets; print(secrets.token_urlsafe(32))'`), or create a key with "
            "`memvm keys create --org NAME`, or pass --insecure (MEMVM_INSECURE=true) if you really mean it."
        )
    return logging.WARNING, (
        f"authentication OFF on a non-loopback address ({settings.host}) because of --insecure: "
        "anyone who can reach it has full access"
    )


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
