import pytest

from memvm.errors import InvalidInput
from memvm.memory import rules


@pytest.mark.parametrize("label", ["human", "system/project/notes", "a.b-c_d", "x" * 100])
def test_check_label_accepts_paths_of_simple_segments(label):
    assert rules.check_label(label) == label


@pytest.mark.parametrize("label", ["", "has space", "/lead", "trail/", "a//b", "tag<x>", "x" * 101])
def test_check_label_refuses_what_cannot_be_a_tag_or_path(label):
    with pytest.raises(InvalidInput, match="Invalid block label"):
        rules.check_label(label)


def test_check_fits_names_both_numbers():
    with pytest.raises(InvalidInput, match="7 characters, over its limit of 5"):
        rules.check_fits("human", "1234567", 5)
    rules.check_fits("human", "12345", 5)


def test_check_limit_holds_value_names_both_numbers():
    with pytest.raises(InvalidInput, match="Limit 2 .* current value length of 3"):
        rules.check_limit_holds_value("human", "abc", 2)


def test_default_descriptions_only_fill_missing_human_and_persona():
    assert "person" in rules.default_description("human", None)
    assert rules.default_description("human", "mine") == "mine"
    assert rules.default_description("human", "") == ""
    assert rules.default_description("notes", None) is None


def test_clean_value_drops_nul_and_treats_none_as_empty():
    assert rules.clean_value(None) == ""
    assert rules.clean_value("a\x00b") == "ab"
