"""MemFS layout: block label ⇄ repository path, and block file bytes ⇄ fields (memory/memfs_layout.py)."""

from __future__ import annotations

import pytest

from memvm.errors import InvalidInput
from memvm.memory.compiler import BlockView, RenderMode, render_blocks
from memvm.memory.memfs_layout import (
    BlockFile,
    MemfsFileError,
    ParsedBlockFile,
    block_path,
    file_label,
    label_of,
    parse,
    render,
)
from memvm.memory.rules import DEFAULT_BLOCK_LIMIT, MAX_BLOCK_LIMIT

PATH = "system/human.md"
NEW_BLOCK = BlockFile(description=None, read_only=False, limit=DEFAULT_BLOCK_LIMIT, value="")


def parsed(text: str | bytes) -> ParsedBlockFile:
    return parse(PATH, text.encode() if isinstance(text, str) else text)


def refusal(text: str | bytes) -> str:
    with pytest.raises(MemfsFileError) as caught:
        parsed(text)
    assert caught.value.path == PATH
    assert str(caught.value) == f"{PATH}: {caught.value.rule}"
    return caught.value.rule


# --- paths --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("label", "path"),
    [
        ("human", "system/human.md"),
        ("persona", "system/persona.md"),
        ("system/human", "system/human.md"),
        ("system/project/notes", "system/project/notes.md"),
        ("reference/notes", "reference/notes.md"),
        ("projects/a", "projects/a.md"),
        ("notes.md", "system/notes.md.md"),
    ],
)
def test_block_path(label, path):
    assert block_path(label) == path


@pytest.mark.parametrize(
    ("path", "label"),
    [
        ("system/human.md", "human"),  # bare: an agent's classic `human` block is this file
        ("system/a/b.md", "system/a/b"),
        ("system/human/prefs/coding.md", "system/human/prefs/coding"),
        ("system/system.md", "system"),
        ("system/notes.md.md", "notes.md"),
    ],
)
def test_label_of_system_markdown_is_a_block(path, label):
    assert label_of(path) == label


@pytest.mark.parametrize(
    "path",
    [
        "reference/notes.md",  # deferred memory: a stored file, never a block
        "reference/system/x.md",
        "skills/search/SKILL.md",
        "skills/search/run.sh",
        "MEMORY.md",
        "human.md",
        "system/notes.txt",
        "system/NOTES.MD",
        "system",
        ".memfs.config.json",
        "systemic/x.md",
    ],
)
def test_label_of_other_paths_is_none(path):
    assert label_of(path) is None


@pytest.mark.parametrize("label", ["human", "persona", "system/a/b", "system/human/prefs/coding", "x.md"])
def test_label_of_inverts_block_path_for_in_context_labels(label):
    assert label_of(block_path(label)) == label


def test_system_prefixed_single_segment_label_reads_back_as_the_bare_label():
    # `human` and `system/human` share a file; the file names the bare label.
    assert label_of(block_path("system/human")) == "human"


@pytest.mark.parametrize(
    "path", ["system/.hidden.md", "system/my notes.md", "system/.md", "system/a//b.md", f"system/{'x' * 101}.md"]
)
def test_label_of_refuses_system_markdown_that_cannot_be_a_label(path):
    with pytest.raises(MemfsFileError) as caught:
        label_of(path)
    assert str(caught.value).startswith(f"{path}: files under system/ are memory blocks")
    assert "Invalid block label" in caught.value.rule
    assert isinstance(caught.value, InvalidInput)


@pytest.mark.parametrize(
    ("path", "attached", "label"),
    [
        ("projects/a.md", ["human", "projects/a"], "projects/a"),  # an attached block outside system/ keeps its file
        ("reference/notes.md", ["reference/notes"], "reference/notes"),
        ("reference/notes.md", ["human"], None),  # a new one is a stored file
        ("system/human.md", ["system/human"], "system/human"),
        ("system/human.md", ["persona"], "human"),  # new: the bare label
        ("system/human.md", ["system/human", "human"], "system/human"),  # a clash: the first attached wins
        ("system/a/b.md", [], "system/a/b"),
        ("skills/x/SKILL.md", ["persona"], None),
    ],
)
def test_file_label_prefers_the_attached_block_shown_at_the_path(path, attached, label):
    assert file_label(path, attached) == label


def test_file_label_refuses_a_new_system_file_with_a_bad_name():
    with pytest.raises(MemfsFileError):
        file_label("system/my notes.md", ["human"])


def test_compiler_git_view_uses_the_same_paths():
    blocks = [BlockView(label=label, value="v", limit=10) for label in ("human", "system/a/b", "projects/a")]
    rendered = render_blocks(blocks, RenderMode.GIT)
    assert "<projection>$MEMORY_DIR/system/human.md</projection>" in rendered
    assert "<projection>$MEMORY_DIR/system/a/b.md</projection>" in rendered
    assert "projects/" in rendered and "a.md" in rendered


# --- render ---------------------------------------------------------------------------------------


def test_render_minimal_is_letta_codes_format():
    file = BlockFile(description="About the user", read_only=False, limit=DEFAULT_BLOCK_LIMIT, value="Name: Bob\n")
    assert render(file, default_limit=DEFAULT_BLOCK_LIMIT) == b"---\ndescription: About the user\n---\nName: Bob\n"


def test_render_read_only_and_non_default_limit_in_fixed_order():
    file = BlockFile(description="d", read_only=True, limit=500, value="v")
    assert render(file, default_limit=DEFAULT_BLOCK_LIMIT) == b"---\ndescription: d\nread_only: true\nlimit: 500\n---\nv"


def test_render_omits_limit_equal_to_the_given_default():
    file = BlockFile(description="d", read_only=False, limit=500, value="v")
    assert render(file, default_limit=500) == b"---\ndescription: d\n---\nv"


def test_render_empty_value_ends_after_the_closing_fence():
    file = BlockFile(description="d", read_only=False, limit=DEFAULT_BLOCK_LIMIT, value="")
    assert render(file, default_limit=DEFAULT_BLOCK_LIMIT) == b"---\ndescription: d\n---\n"


def test_render_description_on_one_trimmed_line():
    file = BlockFile(description="  first\nsecond\r\nthird \n", read_only=False, limit=DEFAULT_BLOCK_LIMIT, value="v")
    assert render(file, default_limit=DEFAULT_BLOCK_LIMIT).startswith(b"---\ndescription: first second third\n---\n")


def test_render_without_description_keeps_the_frontmatter():
    file = BlockFile(description=None, read_only=False, limit=DEFAULT_BLOCK_LIMIT, value="---\nnot: frontmatter\n")
    assert render(file, default_limit=DEFAULT_BLOCK_LIMIT) == b"---\n---\n---\nnot: frontmatter\n"


def test_render_quotes_only_a_description_that_would_read_back_otherwise():
    quoted = BlockFile(description='"Bob"', read_only=False, limit=DEFAULT_BLOCK_LIMIT, value="")
    assert b'description: "\\"Bob\\""\n' in render(quoted, default_limit=DEFAULT_BLOCK_LIMIT)
    plain = BlockFile(description='"Bob" and "Ann"', read_only=False, limit=DEFAULT_BLOCK_LIMIT, value="")
    assert b'description: "Bob" and "Ann"\n' in render(plain, default_limit=DEFAULT_BLOCK_LIMIT)


# --- round trip -----------------------------------------------------------------------------------

ROUND_TRIP = [
    BlockFile(description="About the user", read_only=False, limit=DEFAULT_BLOCK_LIMIT, value="Name: Bob\n"),
    BlockFile(description="d", read_only=True, limit=1, value=""),
    BlockFile(description=None, read_only=False, limit=2000, value="---\nlooks: like frontmatter\n---\n"),
    BlockFile(description="", read_only=False, limit=MAX_BLOCK_LIMIT, value="trailing spaces  \n\n"),
    BlockFile(description='"quoted"', read_only=True, limit=7, value="Zoë 🐙 日本語\r\nCRLF kept"),
    BlockFile(description="'single'", read_only=False, limit=DEFAULT_BLOCK_LIMIT, value="\t"),
    BlockFile(description="d", read_only=False, limit=DEFAULT_BLOCK_LIMIT, value="\n\nafter two blank lines"),
    BlockFile(description="key: value # not a comment", read_only=False, limit=DEFAULT_BLOCK_LIMIT, value="x"),
]


@pytest.mark.parametrize("file", ROUND_TRIP)
def test_parse_of_render_gives_the_fields_back(file):
    back = parse(PATH, render(file, default_limit=DEFAULT_BLOCK_LIMIT))
    assert back.description == file.description
    assert back.value == file.value
    assert back.read_only == (True if file.read_only else None)
    assert back.limit == (None if file.limit == DEFAULT_BLOCK_LIMIT else file.limit)
    assert back.apply_to(NEW_BLOCK) == file


def test_letta_code_written_file_keeps_the_blocks_limit_and_flag():
    # Letta Code's memory tool writes description (and read_only when set) but never limit.
    back = parsed("---\ndescription: About the user\n---\nName: Bob Smith\n")
    assert back == ParsedBlockFile(description="About the user", read_only=None, limit=None, value="Name: Bob Smith\n")
    current = BlockFile(description="old", read_only=True, limit=50, value="Name: Bob")
    assert back.apply_to(current) == BlockFile(description="About the user", read_only=True, limit=50, value="Name: Bob Smith\n")


def test_explicit_values_override_the_current_block():
    back = parsed("---\ndescription: d\nread_only: false\nlimit: 9\n---\nv")
    current = BlockFile(description="old", read_only=True, limit=50, value="old")
    assert back.apply_to(current) == BlockFile(description="d", read_only=False, limit=9, value="v")


# --- parse ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["Name: Bob\n", "", "---", "--- \nx", "  ---\nx", "----\nx\n----\n", "\ufeff---\nx\n---\n"])
def test_no_frontmatter_makes_the_whole_file_the_value(text):
    assert parsed(text) == ParsedBlockFile(description=None, read_only=None, limit=None, value=text)


def test_crlf_file_parses_and_keeps_the_body_verbatim():
    back = parsed("---\r\ndescription: d\r\nlimit: 5\r\n---\r\nline 1\r\nline 2\r\n")
    assert back == ParsedBlockFile(description="d", read_only=None, limit=5, value="line 1\r\nline 2\r\n")


def test_closing_fence_at_end_of_file_means_an_empty_value():
    assert parsed("---\ndescription: d\n---") == ParsedBlockFile(description="d", read_only=None, limit=None, value="")


def test_empty_frontmatter_and_blank_lines_are_fine():
    assert parsed("---\n---\nv") == ParsedBlockFile(description=None, read_only=None, limit=None, value="v")
    assert parsed("---\n\ndescription:   spaced out  \n\n---\nv").description == "spaced out"


def test_only_the_first_closing_fence_ends_the_frontmatter():
    assert parsed("---\ndescription: d\n---\n---\nlimit: 3\n---\n").value == "---\nlimit: 3\n---\n"


@pytest.mark.parametrize(
    ("raw", "description"),
    [
        ('"a \\"quoted\\" \\u00e9 \\n text"', 'a "quoted" é \n text'),
        ("'it''s here'", "it's here"),
        ("''", ""),
        ('""', ""),
        ('"Bob" and "Ann"', '"Bob" and "Ann"'),  # not one JSON string: taken as written
        ("'a' and 'b'", "'a' and 'b'"),  # not one YAML single-quoted scalar
        ('"unterminated', '"unterminated'),
        ("a: b: c", "a: b: c"),
        ("", ""),
    ],
)
def test_description_values(raw, description):
    assert parsed(f"---\ndescription: {raw}\n---\n").description == description


def test_quoted_read_only_and_limit_are_decoded_first():
    back = parsed("---\nread_only: \"true\"\nlimit: '12'\n---\n")
    assert (back.read_only, back.limit) == (True, 12)


@pytest.mark.parametrize(("raw", "expected"), [("true", True), ("false", False)])
def test_read_only_values(raw, expected):
    assert parsed(f"---\nread_only: {raw}\n---\n").read_only is expected


@pytest.mark.parametrize(("raw", "expected"), [("1", 1), ("2000", 2000), ("007", 7), (str(MAX_BLOCK_LIMIT), MAX_BLOCK_LIMIT)])
def test_limit_values(raw, expected):
    assert parsed(f"---\nlimit: {raw}\n---\n").limit == expected


# --- refusals -------------------------------------------------------------------------------------


def test_refuses_text_that_is_not_utf8():
    assert refusal(b"---\ndescription: caf\xe9\n---\n") == "not UTF-8 text (invalid byte at offset 20): save the file as UTF-8"


@pytest.mark.parametrize(("text", "line"), [("a\x00b", 1), ("---\ndescription: d\n---\nok\nb\x00d", 5)])
def test_refuses_a_nul_character(text, line):
    assert refusal(text) == f"contains a NUL character (line {line}): memory files must be plain text"


@pytest.mark.parametrize("escape", ["\\u0000", "\\ud800"])
def test_refuses_an_escape_that_cannot_be_stored(escape):
    assert "description holds a NUL character or a lone surrogate" in refusal(f'---\ndescription: "a{escape}b"\n---\n')


@pytest.mark.parametrize(
    "text", ["---\n", "---\ndescription: d\n", "---\ndescription: d\n--- \nv", "---\r\ndescription: d\r\n----\r\n"]
)
def test_refuses_frontmatter_never_closed(text):
    assert refusal(text) == "frontmatter opened but never closed (missing closing ---): add a line --- after its last key"


@pytest.mark.parametrize("key", ["name", "Description", "read-only", "metadata"])
def test_refuses_an_unknown_key_naming_the_allowed_ones(key):
    assert refusal(f"---\ndescription: d\n{key}: x\n---\n") == (
        f"unknown frontmatter key '{key}' (allowed: description, read_only, limit)"
    )


@pytest.mark.parametrize("line", ["just words", "  continued description"])
def test_refuses_a_line_that_is_not_key_value(line):
    assert refusal(f"---\ndescription: d\n{line}\n---\n") == (
        f"frontmatter line 3 is not 'key: value': {line!r} (keys: description, read_only, limit)"
    )


@pytest.mark.parametrize("key", ["description", "read_only", "limit"])
def test_refuses_a_duplicate_key(key):
    assert refusal(f"---\n{key}: 1\nlimit: 2\ndescription: d\nread_only: true\n---\n").startswith(
        f"duplicate frontmatter key '{key}' (line "
    )


def test_duplicate_key_names_the_second_line():
    assert refusal("---\ndescription: a\n\ndescription: b\n---\n") == "duplicate frontmatter key 'description' (line 4): keep one"


@pytest.mark.parametrize("raw", ["yes", "True", "1", "", "truee"])
def test_refuses_a_bad_read_only(raw):
    assert refusal(f"---\nread_only: {raw}\n---\n") == f"read_only must be true or false, not {raw!r}"


@pytest.mark.parametrize("raw", ["0", "-5", "+5", "5.0", "1e3", "", "ten", "٣", str(MAX_BLOCK_LIMIT + 1), "9" * 5000])
def test_refuses_a_bad_limit(raw):
    assert refusal(f"---\nlimit: {raw}\n---\n") == (
        f"limit must be a whole number of characters from 1 to {MAX_BLOCK_LIMIT}, not {raw!r}"
    )
