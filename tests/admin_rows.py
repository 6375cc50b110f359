"""Read the rows of a Django admin change list, so admin tests assert on the
table itself, not on words that the filter sidebar shows anyway."""

from html.parser import HTMLParser


class _ResultList(HTMLParser):
    def __init__(self):
        super().__init__()
        self.headers, self.rows = [], []
        self._in_table = self._in_head = False
        self._cell = None
        self._skip = 0  # depth inside a header's sort widget (priority number, toggles)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if self._skip or "sortoptions" in (attrs.get("class") or ""):
            self._skip += tag != "br"
            return
        if tag == "table" and attrs.get("id") == "result_list":
            self._in_table = True
        elif self._in_table and tag == "thead":
            self._in_head = True
        elif self._in_table and tag == "tr" and not self._in_head:
            self.rows.append([])
        elif self._in_table and tag in ("th", "td"):
            self._cell = []

    def handle_endtag(self, tag):
        if self._skip:
            self._skip -= 1
            return
        if tag == "table" and self._in_table:
            self._in_table = False
        elif tag == "thead":
            self._in_head = False
        elif tag in ("th", "td") and self._cell is not None:
            text = " ".join("".join(self._cell).split())
            (self.headers if self._in_head else self.rows[-1]).append(text)
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None and not self._skip:
            self._cell.append(data)


def change_list_rows(response):
    """The change list's rows as dicts keyed by column header (the action checkbox column is dropped)."""
    parser = _ResultList()
    parser.feed(response.content.decode())
    headers = parser.headers[1:] if parser.headers and parser.headers[0] == "" else parser.headers
    rows = []
    for cells in parser.rows:
        cells = cells[-len(headers):] if headers else cells
        rows.append(dict(zip(headers, cells)))
    return rows


def rows_by_id(response, id_column):
    return {row[id_column]: row for row in change_list_rows(response)}
