import pytest

from memvm.errors import MemoryEditError
from memvm.memory import edits
from memvm.memory.compiler import LINE_NUMBER_WARNING
from memvm.memory.edits import PatchOp

PREFIX_ERROR = "contains a line number prefix, which is not allowed"
BANNER_ERROR = "contains the line number warning banner"


# --- label_from_path ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "label"),
    [
        ("/memories/human", "human"),
        ("memories/system/a.md", "system/a"),
        ("/memories/system/project/notes.md", "system/project/notes"),
        ("human", "human"),
        ("/human/", "human"),
        ("  /memories/persona  ", "persona"),
        ("system/a", "system/a"),
        ("memories", "memories"),  # a bare name is a label, even this one
        ("/memories/memories", "memories"),
        ("notes.md.bak", "notes.md.bak"),
    ],
)
def test_label_from_path_maps_every_form_the_same_way(path, label):
    assert edits.label_from_path(path) == label


@pytest.mark.parametrize("path", ["/", "", "   ", "/memories/", "/memories", "memories/", ".md", "/memories/.md"])
def test_label_from_path_refuses_paths_without_a_label(path):
    with pytest.raises(MemoryEditError, match="does not name a memory block"):
        edits.label_from_path(path)


# --- check_no_line_numbers ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    ["1→ hello", "  12→\tx", "first\n3→ second", "7→"],
)
def test_line_number_prefix_is_refused_with_the_field_name(text):
    with pytest.raises(MemoryEditError, match=f"^old_string {PREFIX_ERROR}. Do not include line numbers"):
        edits.check_no_line_numbers("old_string", text)


@pytest.mark.parametrize(
    "text",
    [
        LINE_NUMBER_WARNING,
        f"before\n{LINE_NUMBER_WARNING}\nafter",
        "Do NOT include line number prefixes in your memory edit tool calls.",
        "Line numbers shown below (with arrows like '1→') are to help during editing",
    ],
)
def test_warning_banner_or_its_sentences_are_refused(text):
    with pytest.raises(MemoryEditError, match=f"^new_memory {BANNER_ERROR}"):
        edits.check_no_line_numbers("new_memory", text)


@pytest.mark.parametrize("text", ["", "plain", "step 1→2 of the plan", "arrow → in text", "1. item", "x 3→ y", "日本語"])
def test_text_without_prefix_or_banner_passes(text):
    edits.check_no_line_numbers("old_string", text)


# --- append -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "content", "expected"),
    [
        ("", "first", "first"),
        ("a", "b", "a\nb"),
        ("a\n", "b", "a\n\nb"),
        ("a", "", "a\n"),
        ("naïve", "日本\tx\ny", "naïve\n日本\tx\ny"),
    ],
)
def test_append_adds_a_line_without_leading_newline_on_empty(value, content, expected):
    assert edits.append(value, content) == expected


def test_append_refuses_line_numbers():
    with pytest.raises(MemoryEditError, match=f"content {PREFIX_ERROR}"):
        edits.append("a", "2→ b")


# --- replace_all --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "old", "new", "expected"),
    [
        ("cat dog cat", "cat", "bird", "bird dog bird"),
        ("a\nb\na", "a", "", "\nb\n"),
        ("x\ty", "\t", "  ", "x  y"),
        ("line1\nline2\nline3", "1\nline2", "1", "line1\nline3"),
        ("café ☕", "☕", "🍵", "café 🍵"),
    ],
)
def test_replace_all_replaces_every_occurrence(value, old, new, expected):
    assert edits.replace_all("human", value, old, new) == expected


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("zebra", "x", "Old content 'zebra' not found in memory block 'human'"),
        ("", "x", "old_content is empty"),
        ("1→ cat", "x", f"old_content {PREFIX_ERROR}"),
        ("cat", "2→ dog", f"new_content {PREFIX_ERROR}"),
        ("cat", LINE_NUMBER_WARNING, f"new_content {BANNER_ERROR}"),
    ],
)
def test_replace_all_errors(old, new, message):
    with pytest.raises(MemoryEditError, match=message):
        edits.replace_all("human", "cat dog", old, new)


# --- replace_unique -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "old", "new", "expected"),
    [
        ("name: Ann\nage: 3", "Ann", "Bo", "name: Bo\nage: 3"),
        ("a\tb\n\tc", "b", "B", "a\tB\n\tc"),  # tabs elsewhere in the block stay tabs
        ("\tindent", "\tindent", "\tdone", "\tdone"),
        ("one\ntwo\nthree", "one\ntwo\n", "", "three"),
        ("Grüße 👋", "👋", "🤝", "Grüße 🤝"),
        ("x", "x", "", ""),
    ],
)
def test_replace_unique_replaces_the_single_occurrence(value, old, new, expected):
    assert edits.replace_unique("persona", value, old, new) == expected


@pytest.mark.parametrize(
    ("value", "old", "message"),
    [
        (
            "alpha\nbeta",
            "gamma",
            "No replacement was performed, old_string `gamma` did not appear verbatim in memory block with label `persona`.",
        ),
        (
            "a\tb",
            "a    b",  # tabs are not expanded, so spaces do not match a tab
            "did not appear verbatim",
        ),
        (
            "likes tea\nhates coffee\nlikes cake",
            "likes",
            "No replacement was performed. Multiple occurrences of old_string `likes` in lines [1, 3]. "
            "Please ensure it is unique.",
        ),
        ("x\nab ab\ny\nab", "ab", "in lines [2, 4]"),
        ("aaa", "aa", "in lines [1]"),  # overlapping occurrences are ambiguous too
        ("k\nv\nk\nv", "k\nv", "in lines [1, 3]"),
        ("anything", "", "old_string is empty"),
    ],
)
def test_replace_unique_errors(value, old, message):
    with pytest.raises(MemoryEditError) as caught:
        edits.replace_unique("persona", value, old, "new")
    assert message in caught.value.message


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("3→ likes", "x", f"old_string {PREFIX_ERROR}"),
        ("likes", "\n 4→ y", f"new_string {PREFIX_ERROR}"),
        (f"{LINE_NUMBER_WARNING}\nlikes", "x", f"old_string {BANNER_ERROR}"),
        ("likes", LINE_NUMBER_WARNING, f"new_string {BANNER_ERROR}"),
    ],
)
def test_replace_unique_guards_line_numbers(old, new, message):
    with pytest.raises(MemoryEditError, match=message):
        edits.replace_unique("persona", "likes", old, new)


# --- insert_lines -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "text", "insert_line", "expected"),
    [
        ("a\nb", "x", 0, "x\na\nb"),
        ("a\nb", "x", 1, "a\nx\nb"),
        ("a\nb", "x", 2, "a\nb\nx"),  # n
        ("a\nb", "x", -1, "a\nb\nx"),
        ("a\nb", "x", None, "a\nb\nx"),
        ("a\nb", "x\ny", 1, "a\nx\ny\nb"),
        ("a\n", "x", -1, "a\n\nx"),  # a trailing newline is an empty last line
        ("", "x", 0, "x"),
        ("", "x", -1, "x"),
        ("", "x", None, "x"),
        ("", "x\ny", None, "x\ny"),
        ("\tα", "\tβ", 0, "\tβ\n\tα"),
    ],
)
def test_insert_lines(value, text, insert_line, expected):
    assert edits.insert_lines("notes", value, text, insert_line) == expected


@pytest.mark.parametrize(
    ("value", "insert_line", "n"),
    [("a\nb", 3, 2), ("a\nb", -2, 2), ("", 1, 0), ("a", 5, 1)],
)
def test_insert_lines_out_of_range(value, insert_line, n):
    with pytest.raises(MemoryEditError) as caught:
        edits.insert_lines("notes", value, "x", insert_line)
    assert caught.value.message == (
        f"Invalid `insert_line` parameter: {insert_line}. It should be within the range of lines of the memory "
        f"block: [0, {n}], or -1 to append to the end of the memory block."
    )


@pytest.mark.parametrize(
    ("text", "field", "message"),
    [
        ("5→ x", "new_string", f"new_string {PREFIX_ERROR}"),
        ("ok\n 1→x", "insert_text", f"insert_text {PREFIX_ERROR}"),
        (LINE_NUMBER_WARNING, "new_string", f"new_string {BANNER_ERROR}"),
    ],
)
def test_insert_lines_guards_line_numbers_naming_the_field(text, field, message):
    with pytest.raises(MemoryEditError, match=message):
        edits.insert_lines("notes", "a", text, 0, field=field)


# --- rethink ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "new"), [("old", "new\n\tvalue ✓"), ("", "x"), ("x", "")])
def test_rethink_replaces_the_whole_value(value, new):
    assert edits.rethink(value, new) == new


@pytest.mark.parametrize(
    ("new", "message"), [("1→ a", f"new_memory {PREFIX_ERROR}"), (LINE_NUMBER_WARNING, f"new_memory {BANNER_ERROR}")]
)
def test_rethink_guards_line_numbers(new, message):
    with pytest.raises(MemoryEditError, match=message):
        edits.rethink("old", new)


# --- apply_patch --------------------------------------------------------------------------------

BLOCK = "name: Ann\nlikes: tea\n\tindented\nage: 30\nlikes: cake"


@pytest.mark.parametrize(
    ("value", "patch", "expected"),
    [
        (BLOCK, "@@\n name: Ann\n-likes: tea\n+likes: coffee", BLOCK.replace("tea", "coffee")),
        (
            BLOCK,
            "--- a/human\n+++ b/human\n@@ -1,2 +1,2 @@\n-name: Ann\n+name: Bo\n@@\n-age: 30\n+age: 31\n+city: Oslo",
            "name: Bo\nlikes: tea\n\tindented\nage: 31\ncity: Oslo\nlikes: cake",
        ),
        (BLOCK, "@@\n-\tindented\n+\tstill tabbed", BLOCK.replace("\tindented", "\tstill tabbed")),
        (BLOCK, "+appended line", BLOCK + "\nappended line"),
        ("", "+first\n+second", "first\nsecond"),
        ("a\n\nb", "@@\n a\n\n-b\n+c", "a\n\nc"),  # blank line = empty context line
        ("a\nb", "*** Begin Patch\n@@\n-a\n+A\n\n@@\n-b\n+B\n*** End Patch", "A\nB"),  # blank lines between hunks
        ("a\nb\nc", "@@\n a\n-b\n c\n\\ No newline at end of file", "a\nc"),  # other lines are ignored
        ("x → y", "@@\n-x → y\n+z", "z"),
        ("a\nb", "@@\n a\n b", "a\nb"),  # context only: a no-op that still must match
    ],
)
def test_apply_patch(value, patch, expected):
    assert edits.apply_patch("human", value, patch) == expected


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        ("just some words", "No applicable hunks found in patch. Ensure lines start with ' ', '-', or '+'."),
        ("", "No applicable hunks found in patch"),
        ("@@\n@@", "No applicable hunks found in patch"),
        (
            "@@\n-name: Bob\n+name: Ann",
            "Failed to apply patch: expected hunk context not found in the memory block (label `human`, hunk 1 of 1)",
        ),
        ("@@\n-name: Ann\n+name: Bo\n@@\n-age: 99", "(label `human`, hunk 2 of 2)"),
        ("@@\n-    indented\n+x", "expected hunk context not found"),  # spaces do not match a tab
        ("@@\n-likes: cake\n-extra", "Expected start:\nlikes: cake\nextra"),
        ("@@\n 1→ name: Ann\n-likes: tea", f"Patch {PREFIX_ERROR}"),
        ("@@\n-2→ likes: tea\n+likes: x", f"Patch {PREFIX_ERROR}"),
        ("@@\n-likes: tea\n+2→ likes: x", f"Patch {PREFIX_ERROR}"),
        (f"{LINE_NUMBER_WARNING}\n@@\n-likes: tea", f"Patch {BANNER_ERROR}"),
    ],
)
def test_apply_patch_errors(patch, message):
    with pytest.raises(MemoryEditError) as caught:
        edits.apply_patch("human", BLOCK, patch)
    assert message in caught.value.message


@pytest.mark.parametrize(
    ("value", "patch", "where"),
    [
        ("top\nk\nv\nx\nk\nv", "@@\n k\n-v\n+w", "hunk 1 of 1, at lines [2, 5]"),
        ("age: 30\nx\nage: 30\nlikes: tea", "@@\n-likes: tea\n+likes: x\n@@\n age: 30", "hunk 2 of 2, at lines [1, 3]"),
    ],
)
def test_apply_patch_ambiguous_hunk_reports_every_match(value, patch, where):
    with pytest.raises(MemoryEditError) as caught:
        edits.apply_patch("human", value, patch)
    assert caught.value.message.startswith(
        "Failed to apply patch: hunk context matched multiple places in the memory block "
        f"(label `human`, {where}). Please add more unique surrounding context to disambiguate."
    )


# --- multi-block patches ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("patch", "expected"),
    [
        ("*** Add Block: a\n+x", True),
        ("@@\n*** Delete Block: a", True),
        ("*** Update Block: a", True),
        ("*** Move to: b", True),
        ("*** Begin Patch\n@@\n-a\n+b\n*** End Patch", False),
        ("--- a\n+++ b\n@@\n-x", False),
        (" *** Add Block: a", False),
    ],
)
def test_is_multi_block_patch(patch, expected):
    assert edits.is_multi_block_patch(patch) is expected


MULTI = """*** Begin Patch
*** Add Block: /memories/system/project/notes.md
Description: Notes about the project
+first line
+
+\tthird line
some ignored metadata

*** Update Block: human
@@
-name: Ann
+name: Bo
*** Delete Block: memories/scratch
*** Add Block: plain
+only
*** End Patch
"""


def test_parse_multi_block_patch_add_update_delete():
    assert edits.parse_multi_block_patch(MULTI) == [
        PatchOp("add", "system/project/notes", body="first line\n\n\tthird line", description="Notes about the project"),
        PatchOp("update", "human", body="@@\n-name: Ann\n+name: Bo"),
        PatchOp("delete", "scratch"),
        PatchOp("add", "plain", body="only"),
    ]


@pytest.mark.parametrize(
    ("patch", "expected"),
    [
        (
            "*** Update Block: human\n*** Move to: /memories/people/ann\n@@\n-a\n+b",
            [PatchOp("update", "human", body="@@\n-a\n+b"), PatchOp("move", "human", new_label="people/ann")],
        ),
        (
            "*** Update Block: human\n@@\n-a\n+b\n*** Move to: people/ann\n*** Delete Block: x",
            [
                PatchOp("update", "human", body="@@\n-a\n+b"),
                PatchOp("move", "human", new_label="people/ann"),
                PatchOp("delete", "x"),
            ],
        ),
        (
            "*** Update Block: human\n*** Move to: b\n*** Move to: c",
            [PatchOp("move", "human", new_label="b"), PatchOp("move", "b", new_label="c")],
        ),
        (
            "*** Add Block: a\n+x\n*** Move to: b",
            [PatchOp("add", "a", body="x"), PatchOp("move", "a", new_label="b")],
        ),
        ("*** Update Block: human", [PatchOp("update", "human")]),  # apply_patch will report the empty diff
        ("*** Add Block: empty\nDescription:", [PatchOp("add", "empty", description="")]),
        ("*** Add Block: a\n+Description: kept\nDescription: late", [PatchOp("add", "a", body="Description: kept")]),
    ],
)
def test_parse_multi_block_patch_moves_and_edge_cases(patch, expected):
    assert edits.parse_multi_block_patch(patch) == expected


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        ("*** Move to: b", "'*** Move to: b' has no block to rename"),
        ("*** Delete Block: a\n*** Move to: b", "has no block to rename"),
        ("*** Add Block:   ", "'*** Add Block:' must be followed by a non-empty block label"),
        ("*** Delete Block:", "'*** Delete Block:' must be followed by a non-empty block label"),
        ("*** Update Block:", "'*** Update Block:' must be followed by a non-empty block label"),
        ("*** Update Block: a\n*** Move to:", "'*** Move to:' must be followed by a non-empty block label"),
        ("*** Update Block: /memories/", "does not name a memory block"),
        ("*** Begin Patch\n*** End Patch", "No operations found."),
        ("@@\n-a", "No operations found."),
        ("*** Update Block: a\n@@\n-2→ x", f"Patch {PREFIX_ERROR}"),
        (f"*** Add Block: a\n+{LINE_NUMBER_WARNING}", f"Patch {BANNER_ERROR}"),
    ],
)
def test_parse_multi_block_patch_errors(patch, message):
    with pytest.raises(MemoryEditError) as caught:
        edits.parse_multi_block_patch(patch)
    assert message in caught.value.message


def test_update_body_applies_with_apply_patch():
    [op] = edits.parse_multi_block_patch("*** Update Block: human\n@@\n name: Ann\n-likes: tea\n+likes: tee")
    assert edits.apply_patch(op.label, BLOCK, op.body) == BLOCK.replace("likes: tea", "likes: tee")


# --- view and unified_diff ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("", "Memory block 'human' is empty."),
        ("one", "Memory block 'human' (1 line):\n1→ one"),
        ("a\n\tb\n", "Memory block 'human' (3 lines):\n1→ a\n2→ \tb\n3→ "),
        ("ü", "Memory block 'human' (1 line):\n1→ ü"),
    ],
)
def test_view(value, expected):
    assert edits.view("human", value) == expected


def test_view_output_is_refused_as_edit_input():
    with pytest.raises(MemoryEditError, match=PREFIX_ERROR):
        edits.check_no_line_numbers("old_string", edits.view("human", "a\nb").split("\n", 1)[1])


def test_unified_diff_shows_only_the_change_and_its_context():
    old = "\n".join(f"line {i}" for i in range(1, 21))
    new = old.replace("line 10", "line ten")
    diff = edits.unified_diff("notes", old, new)
    assert diff.splitlines() == [
        "--- notes (before)",
        "+++ notes (after)",
        "@@ -8,5 +8,5 @@",
        " line 8",
        " line 9",
        "-line 10",
        "+line ten",
        " line 11",
        " line 12",
    ]
    assert "line 1\n" not in diff and "line 20" not in diff


@pytest.mark.parametrize(
    ("old", "new", "present"),
    [
        ("", "a\nb", ["+a", "+b"]),
        ("a", "", ["-a"]),
        ("a", "a\n", ["+"]),
        ("x\ty", "x y", ["-x\ty", "+x y"]),
    ],
)
def test_unified_diff_edges(old, new, present):
    diff = edits.unified_diff("b", old, new, context=0).splitlines()
    for line in present:
        assert line in diff


def test_unified_diff_without_changes():
    assert edits.unified_diff("human", "same", "same") == "No changes to memory block 'human'."
