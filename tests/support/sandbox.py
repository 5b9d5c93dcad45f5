"""What the sandbox tests need of the host."""

import os

import pytest

from memvm.config import Settings
from memvm.sandbox.runner import Sandbox


async def require_sandbox(settings: Settings) -> None:
    """These tests fail, not skip, where the sandbox cannot run: a skip would hide a broken sandbox.
    A host without user namespaces sets MEMVM_TESTS_WITHOUT_SANDBOX=1 to skip them knowingly."""
    probe = Sandbox(settings)
    await probe.probe()
    if probe.unavailable is not None:
        if os.environ.get("MEMVM_TESTS_WITHOUT_SANDBOX") == "1":
            pytest.skip(f"this host cannot run the bubblewrap sandbox: {probe.unavailable}")
        pytest.fail(f"the bubblewrap sandbox cannot run here: {probe.unavailable}")
