"""Tables as text: plain aligned columns, two spaces apart, a header line, one row per line.
No box characters and no colour in a pipe (``awty list | grep order`` sees plain rows); on a
terminal the header is bold unless NO_COLOR is set, and the table is fitted to the width
(COLUMNS, else the terminal's): low-value columns are dropped, long cells cut with "…", the
last column wraps; ids are never cut or wrapped. Pure text work: ``render`` does the printing.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

GAP = 2


@dataclass(frozen=True)
class Col:
    name: str
    drop: int | None = None  # on a narrow terminal, dropped lowest first; None: always kept
    cut: int | None = None  # may be cut down to this width (with "…"); None: never cut
    wrap: bool = False  # wraps onto more lines instead (meant for the last column)


def col(c: Col | str, last: bool) -> Col:
    """A column given by name is kept and never cut; the last one wraps."""
    return c if isinstance(c, Col) else Col(c, wrap=last)


def cell(value: object) -> str:
    """One line per row, whatever a cell holds (an error message with newlines, a tab)."""
    text = "-" if value is None else str(value)
    # three `in` tests, not a generator over "\n\r\t": this runs for every cell of a table
    return " ".join(text.split()) if "\n" in text or "\r" in text or "\t" in text else text


def natural_widths(cols: list[Col], rows: Iterable[list[str]]) -> list[int] | None:
    """Each column's width with nothing cut, one row at a time; None when there is no row."""
    widths = [len(c.name) for c in cols]
    seen = False
    for r in rows:
        seen = True
        widths = [max(w, len(text)) for w, text in zip(widths, r)]
    return widths if seen else None


def fit(cols: list[Col], natural: list[int], width: int | None
        ) -> tuple[list[int], list[int]]:
    """Which columns to show (indices) and their widths, so that a line fits ``width``
    (None: no limit), from the ``natural_widths`` of the rows. When even every droppable
    column gone does not fit, the rest is shown as it is: the terminal wraps the line,
    nothing is cut that must not be."""
    keep = list(range(len(cols)))
    if width is None:
        return keep, natural

    def least(i: int) -> int:
        c = cols[i]
        if c.wrap:
            return min(natural[i], max(len(c.name), 10))
        return min(natural[i], max(c.cut, len(c.name))) if c.cut is not None else natural[i]

    def total(widths: list[int]) -> int:
        return sum(widths) + GAP * (len(widths) - 1)

    droppable = sorted((c.drop, i) for i, c in enumerate(cols) if c.drop is not None)
    while total([least(i) for i in keep]) > width and droppable:
        keep.remove(droppable.pop(0)[1])
    widths = {i: least(i) for i in keep}
    room = width - total(list(widths.values()))
    for i in keep:  # give the room back, left to right, up to each column's natural width
        if room <= 0:
            break
        extra = min(room, natural[i] - widths[i])
        widths[i] += extra
        room -= extra
    return keep, [widths[i] for i in keep]


def lines(cols: list[Col], rows: Iterable[list[str]], natural: list[int], width: int | None,
          bold: bool = False) -> Iterator[str]:
    """The table's lines, a row at a time: ``natural`` is the rows' ``natural_widths`` (a
    first reading of them), so that no row need be held."""
    import textwrap

    keep, widths = fit(cols, natural, width)
    shown = [cols[i] for i in keep]
    head = _join([c.name for c in shown], widths)
    yield f"\x1b[1m{head}\x1b[0m" if bold else head
    for r in rows:
        cells = [r[i] for i in keep]
        parts: list[list[str]] = []
        for c, w, text in zip(shown, widths, cells):
            if len(text) <= w or width is None:
                parts.append([text])
            elif c.wrap:
                parts.append(textwrap.wrap(text, w, break_on_hyphens=False) or [""])
            else:
                parts.append([text[: w - 1] + "…"])
        for n in range(max(len(p) for p in parts)):
            yield _join([p[n] if n < len(p) else "" for p in parts], widths)


def _join(cells: list[str], widths: list[int]) -> str:
    padded = [c.ljust(w) for c, w in zip(cells[:-1], widths[:-1])] + cells[-1:]
    return (" " * GAP).join(padded).rstrip()
