"""The visible text of an HTML page: for uploaded .html files, and for the pages `fetch_webpage`
reads (runtime/tools/web.py). Standard library only."""

from html.parser import HTMLParser


class _PageText(HTMLParser):
    """The visible text of an HTML page, one line per block element."""

    HIDDEN = frozenset({"script", "style", "noscript", "template", "svg", "iframe"})
    BLOCKS = frozenset(
        {"p", "div", "br", "li", "tr", "title", "h1", "h2", "h3", "h4", "h5", "h6", "pre", "blockquote", "section", "article"}
    )

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.hidden_depth = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self.HIDDEN:
            self.hidden_depth += 1
        elif tag in self.BLOCKS:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in self.HIDDEN:
            self.hidden_depth = max(0, self.hidden_depth - 1)
        elif tag in self.BLOCKS:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self.hidden_depth:
            self.parts.append(data)


def page_text(html: str) -> str:
    """One line per block element, runs of whitespace as one space, no empty lines."""
    parser = _PageText()
    parser.feed(html)
    parser.close()
    lines = (" ".join(line.split()) for line in "".join(parser.parts).splitlines())
    return "\n".join(line for line in lines if line)
