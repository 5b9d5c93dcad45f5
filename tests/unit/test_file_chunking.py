"""A file's chunks: runs of whole lines with the file's own line numbers, nothing lost or repeated."""

import pytest

from memvm.files.chunking import Chunk, chunk_lines, lines_of


def test_lines_are_grouped_while_they_fit_with_the_file_s_line_numbers():
    text = "alpha\nbeta\ngamma\ndelta\n"

    assert chunk_lines(text, 11) == [Chunk(0, 1, 2, "alpha\nbeta"), Chunk(1, 3, 4, "gamma\ndelta")]


def test_a_chunk_may_be_exactly_max_chars_long_line_ends_included():
    assert chunk_lines("abcde\nfghij\nk", 11) == [Chunk(0, 1, 2, "abcde\nfghij"), Chunk(1, 3, 3, "k")]


def test_blank_lines_stay_inside_chunks_and_count_as_lines():
    text = "# Title\n\nFirst paragraph.\n\n\nSecond paragraph.\n"

    assert chunk_lines(text, 1000) == [Chunk(0, 1, 6, "# Title\n\nFirst paragraph.\n\n\nSecond paragraph.")]
    assert chunk_lines(text, 20) == [
        Chunk(0, 1, 2, "# Title\n"),
        Chunk(1, 3, 5, "First paragraph.\n\n"),
        Chunk(2, 6, 6, "Second paragraph."),
    ]


def test_a_run_of_blank_lines_alone_makes_no_chunk_but_keeps_the_numbering():
    text = "a" * 10 + "\n" + "\n" * 12 + "b\n"  # line 1, blank lines 2 to 13, line 14

    assert chunk_lines(text, 10) == [Chunk(0, 1, 1, "a" * 10), Chunk(1, 13, 14, "\nb")]


def test_a_line_longer_than_max_chars_is_cut_into_pieces_with_its_number():
    long_line = "x" * 25

    assert chunk_lines(f"short\n{long_line}\nend", 10) == [
        Chunk(0, 1, 1, "short"),
        Chunk(1, 2, 2, "x" * 10),
        Chunk(2, 2, 2, "x" * 10),
        Chunk(3, 2, 2, "x" * 5),
        Chunk(4, 3, 3, "end"),
    ]


def test_a_long_line_is_cut_after_a_space_rather_than_inside_a_word():
    words = "lorem ipsum dolor sit amet consectetur"

    pieces = chunk_lines(words, 16)

    assert [chunk.text for chunk in pieces] == ["lorem ipsum ", "dolor sit amet ", "consectetur"]
    assert {(chunk.start_line, chunk.end_line) for chunk in pieces} == {(1, 1)}


def test_windows_and_old_mac_line_ends_number_lines_as_lf_does():
    assert chunk_lines("one\r\ntwo\rthree\r\n", 8) == [Chunk(0, 1, 2, "one\ntwo"), Chunk(1, 3, 3, "three")]
    assert lines_of("one\r\ntwo\rthree\r\n") == ["one", "two", "three"]


def test_every_character_is_in_exactly_one_chunk():
    text = "\n".join(f"{'word ' * (n % 7)}line {n}" for n in range(1, 400)) + "\n" + "y" * 2500 + "\nlast"

    chunks = chunk_lines(text, 300)

    assert [chunk.seq for chunk in chunks] == list(range(len(chunks)))
    assert all(len(chunk.text) <= 300 for chunk in chunks)
    rebuilt: dict[int, str] = {}
    for chunk in chunks:
        for offset, line in enumerate(chunk.text.split("\n")):
            rebuilt[chunk.start_line + offset] = rebuilt.get(chunk.start_line + offset, "") + line
    assert [rebuilt[number] for number in sorted(rebuilt)] == lines_of(text)
    assert all(b.start_line >= a.end_line for a, b in zip(chunks, chunks[1:], strict=False))


def test_empty_text_has_no_lines_and_no_chunks():
    assert lines_of("") == []
    assert chunk_lines("", 100) == []
    assert lines_of("a\n") == ["a"]


def test_max_chars_must_be_positive():
    with pytest.raises(ValueError, match="max_chars must be at least 1, not 0"):
        chunk_lines("a", 0)
