"""A PDF's text layer, page by page, with PDFium. Runs in the child process only (child.py)."""

import pypdfium2
import pypdfium2.raw

from memvm.files.parsing.errors import ParseError

_REFUSALS = {
    pypdfium2.raw.FPDF_ERR_PASSWORD: "the PDF is encrypted with a password; upload a copy without one.",
    pypdfium2.raw.FPDF_ERR_SECURITY: "the PDF uses a security handler PDFium does not support; upload an unprotected copy.",
}


def pdf_text(data: bytes) -> str:
    """Each page's text, pages joined by LF. A PDF without any text (scanned pages) is refused:
    there is nothing to search until it is run through OCR."""
    try:
        document = pypdfium2.PdfDocument(data)
    except pypdfium2.PdfiumError as error:
        reason = _REFUSALS.get(getattr(error, "err_code", None), f"the file is not a readable PDF: {str(error).rstrip('.')}.")
        raise ParseError(reason) from None
    try:
        text = "\n".join(_page_text(document, index) for index in range(len(document)))
    finally:
        document.close()
    if not text.strip():
        raise ParseError("the PDF has no text layer (scanned pages or images only); run OCR on it and upload the result.")
    return text


def _page_text(document: pypdfium2.PdfDocument, index: int) -> str:
    page = document[index]
    text_page = page.get_textpage()
    try:
        return str(text_page.get_text_range())
    finally:
        text_page.close()
        page.close()
