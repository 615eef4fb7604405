"""A Markdown table that renders as a table on the website, in Colab and in Jupyter."""

from __future__ import annotations

__all__ = ["table"]


def table(header: list[str], rows: list[list[object]], caption: str = ""):
    """A Markdown table (an IPython ``Markdown`` object): rendered as a table on the website, in
    Colab and in Jupyter, never as fixed-width text that scrolls sideways.

    ``header`` is the list of column names; ``rows`` is a list of rows, each a list with one value per
    column (a row of another length raises ``ValueError``). Cells are converted with ``str``; a ``|``
    inside a cell is escaped. ``caption``, when not empty (the default is none), is a line of Markdown
    printed above the table.
    """
    from IPython.display import Markdown

    if any(len(row) != len(header) for row in rows):
        raise ValueError(f"every row needs {len(header)} cells, one per column of {header}.")

    def line(cells: list[object]) -> str:
        return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"

    body = [line(header), "|" + "---|" * len(header)] + [line(r) for r in rows]
    return Markdown((caption + "\n\n" if caption else "") + "\n".join(body))
