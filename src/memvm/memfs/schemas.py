"""What the MemFS git repository holds, and how a push is refused."""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from dulwich.objects import ShaFile

from memvm.errors import InvalidInput


@dataclass(frozen=True)
class RepoSnapshot:
    """An agent's repository as git sees it: one branch, main."""

    objects: Mapping[bytes, ShaFile]  # every object reachable from head (blobs, trees, commits), by hex sha
    head: bytes | None  # hex sha of refs/heads/main; None for an empty repository


@dataclass(frozen=True)
class Refusal:
    """Why a ref update is refused: `message` is git's one-line reason (` ! [remote rejected] main ->
    main (<message>)`), `details` are printed before it as `remote: <line>`."""

    message: str
    details: tuple[str, ...] = ()


class PushRefused(InvalidInput):
    """A push that breaks a rule: nothing of it is applied."""

    def __init__(self, message: str, details: Iterable[str] = ()) -> None:
        super().__init__(message)
        self.details = list(details)

    @property
    def refusal(self) -> Refusal:
        return Refusal(self.message, tuple(self.details))
