"""LoCoMo-format conversations: turns with their time and dia_id, questions with normalized evidence."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

SCORED_CATEGORIES = (1, 2, 3, 4)
CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
_SESSION_KEY = re.compile(r"session_(\d+)")
# "D1:3", also the data's slips "D:11:26" (stray colon) and "D01:003"
_DIA_ID = re.compile(r"D:?(\d+):(\d+)")


@dataclass(frozen=True)
class Turn:
    dia_id: str
    session: int
    speaker: str
    text: str
    caption: str | None
    at: datetime  # the session's date-time plus one second per turn, so order is kept

    @property
    def content(self) -> str:
        """What memvm stores: `<speaker>: <text>`, plus the shared image's caption."""
        shared = f" [shares {self.caption}]" if self.caption else ""
        return f"{self.speaker}: {self.text}{shared}"


@dataclass(frozen=True)
class Question:
    text: str
    answer: str
    category: int
    evidence: tuple[str, ...]  # normalized ids that exist in the conversation
    unknown_evidence: tuple[str, ...]  # ids (raw or normalized) the conversation has no turn for


@dataclass
class Conversation:
    name: str
    path: Path
    sha256: str
    speakers: tuple[str, str]
    turns: list[Turn]
    questions: list[Question]
    sessions: dict[int, list[Turn]] = field(default_factory=dict)

    @property
    def scored(self) -> list[Question]:
        """Questions of categories 1-4 with at least one evidence turn present."""
        return [q for q in self.questions if q.category in SCORED_CATEGORIES and q.evidence]


def epoch_of(timestamp: str) -> int:
    """An ISO time as memvm returns it (with its zone), in whole seconds since the epoch."""
    return int(datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp())


def parse_when(text: str) -> datetime:
    """'1:56 pm on 8 May, 2023' as UTC (LoCoMo gives no zone)."""
    return datetime.strptime(" ".join(text.split()), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def normalize_evidence(raw: list[Any] | None) -> list[str]:
    """Every dia_id found in the evidence strings ('D8:6; D9:17' gives two), in order, without repeats;
    strings with no id in them (a bare 'D') give none."""
    found: list[str] = []
    for item in raw or []:
        for session, turn in _DIA_ID.findall(str(item)):
            dia_id = f"D{int(session)}:{int(turn)}"
            if dia_id not in found:
                found.append(dia_id)
    return found


def _turns_of(doc: dict[str, Any]) -> dict[int, list[Turn]]:
    sessions: dict[int, list[Turn]] = {}
    numbers = sorted(int(m.group(1)) for key in doc if (m := _SESSION_KEY.fullmatch(key)))
    for number in numbers:
        start = parse_when(doc[f"session_{number}_date_time"])
        sessions[number] = [
            Turn(
                dia_id=raw["dia_id"],
                session=number,
                speaker=raw["speaker"],
                text=raw.get("text", ""),
                caption=raw.get("blip_caption") or None,
                at=start + timedelta(seconds=index),
            )
            for index, raw in enumerate(doc[f"session_{number}"])
        ]
    return sessions


def _question(raw: dict[str, Any], known: set[str]) -> Question:
    ids = normalize_evidence(raw.get("evidence"))
    unparsed = [str(e) for e in raw.get("evidence") or [] if not _DIA_ID.search(str(e))]
    return Question(
        text=raw["question"],
        answer=str(raw.get("answer", raw.get("adversarial_answer", ""))),
        category=int(raw["category"]),
        evidence=tuple(i for i in ids if i in known),
        unknown_evidence=tuple([i for i in ids if i not in known] + unparsed),
    )


def conversation_of(path: Path, doc: dict[str, Any]) -> Conversation:
    """`doc` is one LoCoMo file's JSON (the conversation may also sit under a `conversation` key)."""
    body = doc.get("conversation", doc)
    sessions = _turns_of(body)
    turns = [t for number in sorted(sessions) for t in sessions[number]]
    if not turns:
        raise ValueError(f"{path}: no session_N turns")
    first = body.get("speaker_a") or turns[0].speaker
    second = body.get("speaker_b") or next((t.speaker for t in turns if t.speaker != first), "other")
    known = {t.dia_id for t in turns}
    return Conversation(
        name=path.stem,
        path=path,
        sha256=hashlib.sha256(path.read_bytes()).hexdigest(),
        speakers=(first, second),
        turns=turns,
        questions=[_question(q, known) for q in doc.get("qa", [])],
        sessions=sessions,
    )


def load_dir(data_dir: Path, only: list[str] | None = None) -> list[Conversation]:
    """Every *.json of the directory (or those whose stem is in `only`), by name."""
    paths = sorted(data_dir.glob("*.json"), key=lambda p: (len(p.stem), p.stem))
    if only:
        paths = [p for p in paths if p.stem in only]
    if not paths:
        raise FileNotFoundError(f"no LoCoMo *.json in {data_dir}" + (f" named {only}" if only else ""))
    return [conversation_of(p, json.loads(p.read_text())) for p in paths]
