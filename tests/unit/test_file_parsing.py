"""Uploads to text: which files are read and as what, each format's text, and the child process that
reads PDF and DOCX under limits."""

import subprocess
import sys

import pytest

from memvm.api.errors import status_of
from memvm.errors import UnsupportedMediaType
from memvm.files.parsing import ParseError, media_type_for, parse_document
from memvm.files.parsing.html import page_text
from memvm.files.parsing.isolation import ChildLimits, read_in_child
from memvm.runtime.tools import web
from tests.support.documents import DOCX_TYPE, SAMPLE_DOCX_TEXT, pdf_bytes, sample_docx

PDF = "application/pdf"
OLE_SIGNATURE = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"  # what encrypted Office files and .doc files start with


@pytest.mark.parametrize(
    ("filename", "declared", "expected"),
    [
        ("report.PDF", "application/octet-stream", PDF),  # the extension decides over a generic type
        ("notes.md", None, "text/markdown"),
        ("server.log", None, "text/plain"),
        ("letter.docx", None, DOCX_TYPE),
        ("data.json", "text/plain", "application/json"),
        ("dir/sub\\Dockerfile", None, "text/x-dockerfile"),
        ("README", "text/x-rst; charset=utf-8", "text/x-rst"),  # any text/* a client declares
        ("table.tsv", "application/octet-stream", "text/tab-separated-values"),  # Python's own table
        ("scan", "application/pdf", PDF),
    ],
)
def test_an_upload_is_read_as_the_type_its_name_or_its_client_says(filename, declared, expected):
    assert media_type_for(filename, declared) == expected


def test_an_unsupported_file_is_a_415_that_lists_what_is_supported():
    with pytest.raises(UnsupportedMediaType) as refused:
        media_type_for("photo.png", "image/png")

    assert status_of(refused.value) == 415
    assert refused.value.message.startswith("Cannot read 'photo.png' (image/png): this server reads files with the extensions ")
    assert ".bash, .bat, .c, " in refused.value.message
    assert ".docx, " in refused.value.message and ".log, " in refused.value.message
    assert refused.value.message.endswith(", .yml, and any text/* file.")


def test_text_is_kept_as_it_is_with_lf_line_ends_and_no_byte_order_mark():
    data = "\ufeffid,name\r\n1,Ann\r2,Bob\n\n  3 , Cy \n".encode()

    assert parse_document(data, "text/csv") == "id,name\n1,Ann\n2,Bob\n\n  3 , Cy \n"


def test_json_is_not_reformatted():
    data = b'{"a": [1,\n  2],   "b": {}}\n'

    assert parse_document(data, "application/json") == '{"a": [1,\n  2],   "b": {}}\n'


def test_text_that_is_not_utf8_is_decoded_in_the_encoding_that_fits():
    assert parse_document("Café crème\nnaïve\n".encode("latin-1"), "text/plain") == "Café crème\nnaïve\n"
    assert parse_document("¿Dónde está la estación, señor?".encode("cp1252"), "text/plain") == "¿Dónde está la estación, señor?"
    assert parse_document("Привет, мир! Как дела?".encode("utf-16"), "text/plain") == "Привет, мир! Как дела?"


def test_a_nul_character_refuses_the_file_and_names_its_line():
    with pytest.raises(ParseError, match=r"^the file has a NUL character on line 2: it looks like a binary file"):
        parse_document(b"first\r\nsec\x00ond\n", "text/plain")


def test_bytes_of_no_known_encoding_are_refused():
    binary = bytes(range(256)) * 8

    with pytest.raises(ParseError, match="neither UTF-8 nor text in another known encoding"):
        parse_document(binary, "text/plain")


def test_html_is_read_as_its_visible_text():
    page = b"<html><head><title>T</title><script>var x = 1;</script></head><body><h1>Hi</h1><p>a <b>b</b></p></body></html>"

    assert parse_document(page, "text/html") == "T\nHi\na b"


def test_the_web_tool_reads_pages_with_the_same_extraction():
    assert web.page_text is page_text


def test_a_type_that_is_not_text_cannot_be_parsed():
    with pytest.raises(ParseError, match="files of type image/png cannot be read as text"):
        parse_document(b"\x89PNG", "image/png")


def test_a_pdf_is_read_page_by_page():
    document = pdf_bytes([["Hello (world)", "second line"], ["page two"]])

    assert parse_document(document, PDF) == "Hello (world)\nsecond line\npage two"


@pytest.mark.parametrize(
    ("document", "reason"),
    [
        (pdf_bytes([[], []]), "the PDF has no text layer (scanned pages or images only); run OCR on it"),
        (pdf_bytes([["secret"]], password_protected=True), "the PDF is encrypted with a password; upload a copy without one."),
        (b"%PDF-1.4\nnot really", "the file is not a readable PDF: Failed to load document (PDFium: Data format error)."),
        (pdf_bytes([["cut"]])[:60], "the file is not a readable PDF: "),
    ],
    ids=["no text layer", "password", "garbage", "truncated"],
)
def test_a_pdf_that_cannot_be_read_says_why(document, reason):
    with pytest.raises(ParseError) as refused:
        parse_document(document, PDF)

    assert refused.value.reason.startswith(reason)


def test_a_docx_is_read_in_document_order_with_headings_and_table_rows():
    assert parse_document(sample_docx(), DOCX_TYPE) == SAMPLE_DOCX_TEXT


@pytest.mark.parametrize(
    ("document", "reason"),
    [
        (b"PK\x03\x04 not a zip at all", "the file is not a readable .docx file (BadZipFile: "),
        (OLE_SIGNATURE + bytes(504), "the file is a password-protected Word document or an old binary .doc"),
    ],
    ids=["corrupt", "encrypted or .doc"],
)
def test_a_docx_that_cannot_be_read_says_why(document, reason):
    with pytest.raises(ParseError) as refused:
        parse_document(document, DOCX_TYPE)

    assert refused.value.reason.startswith(reason)


def test_a_reader_that_outlasts_its_time_is_stopped():
    with pytest.raises(ParseError, match=r"^reading the document took longer than 0.05 s; it was stopped\.$"):
        read_in_child(pdf_bytes([["x"]]), PDF, ChildLimits(seconds=0.05, cpu_seconds=60, memory_bytes=2**30))


def test_a_reader_over_its_memory_is_refused():
    document = pdf_bytes([[f"line {line} of page {page}" for line in range(40)] for page in range(300)])

    with pytest.raises(ParseError, match=r"^reading the PDF needs more than 8 MiB of memory\.$"):
        read_in_child(document, PDF, ChildLimits(seconds=60, cpu_seconds=60, memory_bytes=8 * 2**20))


def test_a_reader_over_its_cpu_time_is_stopped():
    """Some 3 s of CPU to read (0.8 s measured for 1,000 pages like these), against a limit of 1 s."""
    document = pdf_bytes([[f"line {line} of page {page} with a few more words" for line in range(45)] for page in range(4000)])

    with pytest.raises(ParseError, match=r"^reading the document used more than 1 s of CPU; it was stopped\.$"):
        read_in_child(document, PDF, ChildLimits(seconds=60, cpu_seconds=1, memory_bytes=2**30))


def test_the_server_process_never_loads_the_document_libraries():
    """Only the child that reads a PDF or DOCX does: the package alone loads none of them."""
    check = "import sys, memvm.files.parsing\nprint([m for m in ('pypdfium2', 'docx', 'lxml') if m in sys.modules])"

    loaded = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, check=True, timeout=60)

    assert loaded.stdout.strip() == "[]"
