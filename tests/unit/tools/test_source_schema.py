"""Deriving a custom tool's JSON schema from its source, as a table; bad source is refused with a
message that says what to fix."""

import pytest

from memvm.errors import InvalidInput
from memvm.tools.source_schema import derive_schema

ROLL_DICE = '''
import random
from typing import Literal, Optional


def helper(x: int) -> int:
    return x


def roll_dice(sides: int, count: int = 1, label: Optional[str] = None, mode: Literal["sum", "max"] = "sum",
              tags: list[str] | None = None, options: dict = None, agent_state: "AgentState" = None) -> str:
    """Roll some dice and report the result.

    Use it when the user wants a random number.

    Args:
        sides (int): How many sides each die has.
        count: How many dice to roll; the results
            are added up or the largest is kept.
        label: A name for the roll.
        mode: sum or max.
        tags: Labels to attach.

    Returns:
        str: The outcome.
    """
    return str(random.randint(1, sides))
'''


def test_signature_and_google_docstring_become_the_schema():
    schema = derive_schema(ROLL_DICE)

    assert schema["name"] == "roll_dice"
    assert schema["description"] == "Roll some dice and report the result. Use it when the user wants a random number."
    properties = schema["parameters"]["properties"]
    assert properties == {
        "sides": {"type": "integer", "description": "How many sides each die has."},
        "count": {"type": "integer", "description": "How many dice to roll; the results are added up or the largest is kept."},
        "label": {"type": "string", "description": "A name for the roll."},
        "mode": {"type": "string", "enum": ["sum", "max"], "description": "sum or max."},
        "tags": {"type": "array", "items": {"type": "string"}, "description": "Labels to attach."},
        "options": {"type": "object"},
    }
    assert schema["parameters"]["required"] == ["sides"]  # agent_state is supplied by the server


def test_a_named_function_is_picked_over_the_last_one():
    assert derive_schema(ROLL_DICE, name="helper")["parameters"]["properties"] == {"x": {"type": "integer"}}


@pytest.mark.parametrize(
    ("source", "fragment"),
    [
        ("def broken(:\n    pass", "not valid Python"),
        ("x = 1", "defines no function"),
        ("def f(city):\n    '''Weather.'''", "'city' of 'f' has no type annotation"),
        ("def f(*args: int):\n    pass", "*args or **kwargs"),
        ("def f(when: datetime):\n    pass", "cannot be described to the model"),
        ("def f(x: Literal['a', 1]):\n    pass", "constants of one type"),
    ],
)
def test_bad_source_is_refused_with_what_to_fix(source, fragment):
    with pytest.raises(InvalidInput) as refused:
        derive_schema(source)

    assert fragment in refused.value.message


def test_an_unknown_function_name_lists_the_defined_ones():
    with pytest.raises(InvalidInput, match="no function named 'nope'; it defines helper, roll_dice"):
        derive_schema(ROLL_DICE, name="nope")
