"""A folder's files: upload, list, look up, delete. An upload is stored as it came, with status
`parsing`, and answered at once; the worker (processing.py) reads it into text and chunks.

A file's name is what agents see and name in tools: "<folder name>/<name>", unique in its folder.
Uploading a name the folder already holds is settled by `duplicate_handling`, as Letta does:
`suffix` (the default) stores it as "<name>_(n)<ext>", `replace` deletes the old file first,
`skip` answers the old file, `error` refuses."""

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession

from memvm.db.pagination import PageRequest, fetch_page
from memvm.errors import Conflict, InvalidInput, NotFound, TooLarge
from memvm.files import processing, repository, service, views
from memvm.files.parsing import media_type_for
from memvm.files.schemas import DuplicateHandling
from memvm.ids import new_id
from memvm.orm import Folder, FolderFile

MAX_NAME_CHARS = 255
# Characters no common file system takes in a name, and control characters.
_UNSAFE = re.compile(r'[\x00-\x1f\x7f<>:"|?*]')


@dataclass(frozen=True)
class Upload:
    filename: str  # as the client sent it
    declared_type: str | None  # the part's Content-Type
    data: bytes
    name: str | None = None  # stored under this name instead
    duplicate_handling: DuplicateHandling = "suffix"


@dataclass(frozen=True)
class Uploaded:
    file: FolderFile
    skipped: bool  # a duplicate under `skip`: `file` is the one already there


async def upload_file(session: AsyncSession, folder_id: str, upload: Upload, *, max_bytes: int) -> Uploaded:
    """Store an upload for the worker. Refused before anything is stored: over `max_bytes` (413),
    a type the server cannot read (415), a name it cannot store, a duplicate under `error` (409)."""
    if len(upload.data) > max_bytes:
        raise TooLarge(
            f"The file is {len(upload.data)} bytes; files of up to {max_bytes} bytes can be uploaded "
            "(MEMVM_MAX_FILE_UPLOAD_BYTES). Upload a smaller file, or split it."
        )
    media_type = media_type_for(upload.filename, upload.declared_type)
    original = safe_file_name(upload.name if upload.name is not None else upload.filename)
    folder = await repository.lock_folder(session, folder_id)
    if folder is None:
        raise NotFound(f"Folder {folder_id!r} not found.")
    existing = await repository.file_by_original_name(session, folder_id, original)
    if existing is not None and upload.duplicate_handling == "skip":
        return Uploaded(existing, skipped=True)
    if existing is not None and upload.duplicate_handling == "error":
        raise Conflict(
            f"File {original!r} already exists in folder {folder.name!r}; upload it with duplicate_handling "
            "suffix, replace or skip, or under another name (name=...)."
        )
    if existing is not None and upload.duplicate_handling == "replace":
        file_name = existing.file_name
        await delete_files(session, [existing.id])
    else:
        file_name = await _free_name(session, folder, original)
    file = FolderFile(
        id=new_id("file"),
        folder_id=folder.id,
        file_name=file_name,
        original_file_name=original,
        file_type=media_type,
        file_size=len(upload.data),
        raw=upload.data,
        processing_status="parsing",
        attempts=0,
    )
    session.add(file)
    await session.flush()
    return Uploaded(file, skipped=False)


@dataclass(frozen=True)
class ReadFile:
    """A file whose text was read elsewhere (an imported agent file's), with what reading it found."""

    name: str  # stored as "<folder>/<name>", or suffixed as an upload is if that is taken
    original_file_name: str
    file_type: str
    file_size: int
    outcome: processing.Parsed | processing.Failed


async def add_read_file(session: AsyncSession, folder: Folder, read: ReadFile) -> FolderFile:
    """Store a file as the worker leaves one it has read: its chunks wait for their vectors (or it
    is `error`, with the reason). No agent sees it yet: that is the caller's to decide."""
    file = FolderFile(
        id=new_id("file"),
        folder_id=folder.id,
        file_name=await _free_name(session, folder, read.name),
        original_file_name=read.original_file_name,
        file_type=read.file_type,
        file_size=read.file_size,
        processing_status="parsing",
        attempts=0,
    )
    session.add(file)
    await session.flush()
    await processing.store(session, file, read.outcome)
    return file


def safe_file_name(name: str) -> str:
    """The last part of a client's path, without characters file systems refuse, at most
    MAX_NAME_CHARS long (the extension kept)."""
    cleaned = _UNSAFE.sub("", re.split(r"[/\\]", name)[-1]).strip()
    if not cleaned:
        raise InvalidInput(f"The file name {name!r} leaves no name once cleaned; upload it with name=... set.")
    if cleaned.startswith("."):
        raise InvalidInput(f"The file name {cleaned!r} starts with '.'; upload it under another name (name=...).")
    stem, dot, extension = cleaned.rpartition(".")
    if not dot or len(extension) >= MAX_NAME_CHARS // 2:
        return cleaned[:MAX_NAME_CHARS]
    return f"{stem[: MAX_NAME_CHARS - len(extension) - 1]}.{extension}"


async def _free_name(session: AsyncSession, folder: Folder, original: str) -> str:
    """ "<folder>/<name>", or the first free "<folder>/<stem>_(n)<ext>" if that is taken."""
    stem, dot, extension = original.rpartition(".")
    if not dot:
        stem, extension = original, ""
    prefix = f"{folder.name}/{stem}"
    suffix = f"{dot}{extension}"
    taken = await repository.file_names_starting(session, folder.id, prefix)
    candidates = itertools.chain([f"{folder.name}/{original}"], (f"{prefix}_({n}){suffix}" for n in itertools.count(1)))
    return next(name for name in candidates if name not in taken)


async def list_files(session: AsyncSession, folder_id: str, page: PageRequest, *, include_content: bool) -> list[FolderFile]:
    await service.get_folder(session, folder_id)
    query = repository.files_query(folder_id)
    return await fetch_page(session, repository.with_content(query) if include_content else query, FolderFile, page)


async def get_file(session: AsyncSession, folder_id: str, file_id: str, *, include_content: bool = False) -> FolderFile:
    file = await repository.file_in_folder(session, folder_id, file_id, content=include_content)
    if file is None:
        raise NotFound(f"File {file_id!r} not found in folder {folder_id!r}.")
    return file


async def delete_file(session: AsyncSession, folder_id: str, file_id: str) -> None:
    """Delete a file: it leaves every agent's view first, then goes with its chunks. Its folder is
    locked first (service.py's lock order): an attach of the folder, which gives the agent views of
    its files, waits for this or this for it."""
    await repository.lock_folder_for_files(session, folder_id)
    await delete_files(session, [(await get_file(session, folder_id, file_id)).id])


async def delete_files(session: AsyncSession, file_ids: Sequence[str]) -> None:
    """Delete files of one folder, which the caller has locked."""
    await repository.lock_files(session, file_ids)
    await views.forget_files(session, file_ids)
    for file_id in file_ids:
        await repository.delete_file(session, file_id)
