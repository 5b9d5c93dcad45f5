"""A hand-made conversation in LoCoMo's format: 2 sessions, 8 turns, 3 scored questions (one with
malformed evidence, one naming a turn the conversation lacks) and one adversarial question."""

import json
from pathlib import Path

TINY = {
    "speaker_a": "Alice",
    "speaker_b": "Bob",
    "session_1_date_time": "1:56 pm on 8 May, 2023",
    "session_1": [
        {"speaker": "Alice", "dia_id": "D1:1", "text": "I adopted a golden retriever puppy named Biscuit last week."},
        {"speaker": "Bob", "dia_id": "D1:2", "text": "Congrats! I just started learning the violin."},
        {
            "speaker": "Alice",
            "dia_id": "D1:3",
            "text": "He chewed my running shoes yesterday.",
            "blip_caption": "a photo of a puppy chewing a shoe",
        },
        {"speaker": "Bob", "dia_id": "D1:4", "text": "My teacher says I should practice scales daily."},
    ],
    "session_2_date_time": "10:00 am on 15 June, 2023",
    "session_2": [
        {"speaker": "Alice", "dia_id": "D2:1", "text": "I ran the city marathon on Sunday in four hours."},
        {"speaker": "Bob", "dia_id": "D2:2", "text": "I performed my first violin recital at the library."},
        {"speaker": "Alice", "dia_id": "D2:3", "text": "Biscuit waited for me at the finish line."},
        {"speaker": "Bob", "dia_id": "D2:4", "text": "We should celebrate with pizza at Luigi's."},
    ],
    "qa": [
        {"question": "What is the name of Alice's puppy?", "answer": "Biscuit", "evidence": ["D1:1"], "category": 4},
        {
            "question": "What instrument does Bob play and where was his first recital?",
            "answer": "violin, at the library",
            "evidence": ["D1:2; D2:2"],
            "category": 1,
        },
        {
            "question": "When did Alice run the marathon?",
            "answer": "a Sunday in June 2023",
            "evidence": ["D2:1", "D9:9"],
            "category": 2,
        },
        {"question": "What is Bob's dog called?", "adversarial_answer": "Biscuit", "evidence": ["D1:1"], "category": 5},
    ],
}


def tiny(directory: Path) -> Path:
    """TINY written as tiny.json in the directory."""
    path = directory / "tiny.json"
    path.write_text(json.dumps(TINY))
    return path
