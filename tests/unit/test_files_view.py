"""The window of an open file and the <directories> section, byte for byte: the file's own line
numbers, whole lines up to the view's size, a note that says how to read on when cut."""

import pytest

from memvm.memory.compiler import RenderMode, compile_system_prompt
from memvm.memory.files_view import DirectoryView, FileLimits, FileView, file_limits, render_directories, render_window

NUMBERED = "\n".join(f"line number {n}" for n in range(1, 41))  # 40 lines of 13-14 characters


def test_a_file_that_fits_is_shown_whole_with_blank_lines_and_indentation_kept():
    window = render_window("alpha\n\n  gamma\ndelta\n", view_chars=500)

    assert window.text == "[Viewing file start (out of 4 lines)]\n1: alpha\n2: \n3:   gamma\n4: delta"
    assert (window.start_line, window.end_line, window.total_lines, window.cut) == (1, 4, 4, False)


def test_a_range_is_numbered_as_the_file_and_says_which_lines_it_shows():
    window = render_window(NUMBERED, view_chars=500, start_line=11, length=3)

    assert window.text == (
        "[Viewing lines 11 to 13 (out of 40 lines)]\n11: line number 11\n12: line number 12\n13: line number 13"
    )
    assert not window.cut


def test_what_does_not_fit_is_cut_at_a_whole_line_with_the_offset_that_reads_on():
    window = render_window(NUMBERED, view_chars=500, start_line=3, length=30)

    shown = "\n".join(f"{n}: line number {n}" for n in range(3, 21))
    assert window.text == (
        f"[Viewing lines 3 to 20 (out of 40 lines)]\n{shown}\n"
        "...[TRUNCATED] Lines 21 to 32 did not fit in this file's view (500 characters); "
        "to read on, call open_files with offset=20."
    )
    assert len(window.text) <= 500 and window.cut and window.end_line == 20
    # One more line would not have fitted: the cut is as late as the size allows.
    assert len(window.text) + len("\n21: line number 21") > 500


def test_the_whole_file_cut_short_names_its_lines_rather_than_the_file_start():
    window = render_window(NUMBERED, view_chars=500)

    assert window.text.startswith("[Viewing lines 1 to 18 (out of 40 lines)]\n1: line number 1\n")
    assert window.text.endswith(
        "\n18: line number 18\n...[TRUNCATED] Lines 19 to 40 did not fit in this file's view (500 characters); "
        "to read on, call open_files with offset=18."
    )
    assert len(window.text) <= 500 < len(window.text) + len("\n19: line number 19")


def test_a_line_longer_than_the_view_is_shown_cut_and_says_so():
    window = render_window("x" * 600 + "\nsecond", view_chars=500)

    header = "[Viewing lines 1 to 1 (out of 2 lines)]"
    note = (
        "...[TRUNCATED] Line 1 is longer than this file's view (500 characters) and is cut. "
        "Line 2 did not fit; to read on, call open_files with offset=1."
    )
    kept = 500 - len(f"{header}\n1: \n{note}")
    assert window.text == f"{header}\n1: {'x' * kept}\n{note}"
    assert kept > 300 and window.cut


def test_an_empty_file_has_no_lines_and_a_start_past_the_end_is_refused():
    assert render_window("", view_chars=500).text == "[Viewing file start (out of 0 lines)]"
    with pytest.raises(ValueError, match="outside 1..40"):
        render_window(NUMBERED, view_chars=500, start_line=41)


@pytest.mark.parametrize(
    ("context_window", "expected"),
    [
        (None, (5, 50_000)),
        (8_000, (3, 5_000)),
        (32_000, (5, 15_000)),
        (128_000, (10, 25_000)),
        (200_000, (10, 40_000)),
        (1_000_000, (15, 40_000)),
    ],
)
def test_limits_default_to_letta_s_for_the_context_window(context_window, expected):
    assert file_limits(None, None, context_window) == FileLimits(*expected)
    assert file_limits(2, 900, context_window) == FileLimits(2, 900)


GUIDE_WINDOW = "[Viewing file start (out of 2 lines)]\n1: # Guide\n2: Read me."
DIRECTORIES = [
    DirectoryView(
        "docs",
        "Project documents",
        "Cite the file and line.",
        (FileView("docs/guide.md", True, GUIDE_WINDOW, 1, 2, 2), FileView("docs/notes.txt", False, None, None, None, 7)),
    ),
    DirectoryView("empty", None, None),
]


def test_directories_list_every_file_with_metadata_and_only_open_ones_with_their_view():
    assert render_directories(DIRECTORIES, FileLimits(5, 15_000)) == (
        "<directories>\n"
        "<file_limits>\n- current_files_open=1\n- max_files_open=5\n</file_limits>\n"
        '<directory name="docs">\n'
        "<description>Project documents</description>\n"
        "<instructions>Cite the file and line.</instructions>\n"
        '<file status="open" name="docs/guide.md">\n'
        "<metadata>\n- read_only=true\n- chars_current=60\n- chars_limit=15000\n"
        "- lines_in_view=1-2\n- total_lines=2\n</metadata>\n"
        f"<value>\n{GUIDE_WINDOW}\n</value>\n"
        "</file>\n"
        '<file status="closed" name="docs/notes.txt">\n'
        "<metadata>\n- read_only=true\n- chars_current=0\n- chars_limit=15000\n- total_lines=7\n</metadata>\n"
        "</file>\n"
        "</directory>\n"
        '<directory name="empty">\n'
        "</directory>\n"
        "</directories>"
    )
    assert render_directories([], FileLimits(5, 15_000)) == ""


@pytest.mark.parametrize("mode", list(RenderMode))
def test_directories_come_between_the_memory_blocks_and_the_metadata_in_every_mode(mode):
    directories = render_directories(DIRECTORIES, FileLimits(5, 15_000))

    prompt = compile_system_prompt(system="BASE", blocks=[], mode=mode, metadata="META", directories=directories)

    assert prompt.endswith(f"\n\n{directories}\n\nMETA")
