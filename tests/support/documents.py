"""Documents the file tests upload, made here rather than checked in: a PDF written object by object
(its text layer is what the test says), and a Word document built with python-docx."""

import io

import docx

DOCX_TYPE = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"


def pdf_bytes(pages: list[list[str]], *, password_protected: bool = False) -> bytes:
    """A PDF with one page per item, each line of it drawn in Helvetica (no text: a page with no text
    layer, as a scan's). `password_protected` adds a standard security handler whose user password is
    not the empty one, so a reader needs a password to open it."""
    objects = ["<< /Type /Catalog /Pages 2 0 R >>", "", "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    kids = []
    for lines in pages:
        shown = " ".join(f"({_escaped(line)}) Tj 0 -16 Td" for line in lines)
        stream = f"BT /F1 12 Tf 72 720 Td {shown} ET"
        objects.append(f"<< /Length {len(stream)} >>\nstream\n{stream}\nendstream")
        page = "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >>"
        objects.append(f"{page} /Contents {len(objects)} 0 R >>")
        kids.append(f"{len(objects)} 0 R")
    objects[1] = f"<< /Type /Pages /Kids [{' '.join(kids)}] /Count {len(kids)} >>"
    trailer = f"/Size {len(objects) + 1} /Root 1 0 R"
    if password_protected:
        objects.append(f"<< /Filter /Standard /V 1 /R 2 /O <{'00' * 32}> /U <{'11' * 32}> /P -4 >>")
        trailer += f" /Encrypt {len(objects)} 0 R /ID [<{'ab' * 16}> <{'ab' * 16}>]"
    return _with_cross_references(objects, trailer)


def _escaped(line: str) -> str:
    return line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def _with_cross_references(objects: list[str], trailer: str) -> bytes:
    document = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(document))
        document += f"{number} 0 obj\n{body}\nendobj\n".encode()
    table = f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n" + "".join(f"{offset:010d} 00000 n \n" for offset in offsets)
    return bytes(document) + f"{table}trailer\n<< {trailer} >>\nstartxref\n{len(document)}\n%%EOF\n".encode()


# What parse_document reads from sample_docx(): headings as `#` lines, a table row a line, in order.
SAMPLE_DOCX_TEXT = """# Quarterly report
## Summary
Revenue grew in every region.
Region | Q1 | Q2
North | 10 | 12
South and East | 7
## Outlook
Next quarter looks steady."""


def sample_docx() -> bytes:
    """A Word document with a title, headings, paragraphs and a table around them (one merged cell)."""
    document = docx.Document()
    document.add_heading("Quarterly report", level=0)
    document.add_heading("Summary", level=2)
    document.add_paragraph("Revenue grew in every region.")
    table = document.add_table(rows=3, cols=3)
    for row, cells in zip(table.rows, (["Region", "Q1", "Q2"], ["North", "10", "12"]), strict=False):
        for cell, text in zip(row.cells, cells, strict=True):
            cell.text = text
    table.cell(2, 0).merge(table.cell(2, 1)).text = "South and\nEast"
    table.cell(2, 2).text = "7"
    document.add_heading("Outlook", level=2)
    document.add_paragraph("Next quarter looks steady.")
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()
