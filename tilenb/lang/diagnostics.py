"""Every error tilenb reports to a user, and the one place that formats them.

Guarantees: a `TileError` always has a message; a positioned one has a 1-based `.line` and
`.column` into `.filename`, and `str()` reads `file:line:col: error: message`, then the source
line and a caret under the column (of a line longer than 120 characters, the 120 around the
column, "..." marking the cuts). When the checker finds several errors, the raised error is
the first by position and `.diagnostics` holds all of them, sorted; `str()` shows them all.
"""
from __future__ import annotations

from typing import List, Optional, Sequence


SHOWN_LINE = 120   # the most characters of a source line an error shows (around its column)


class TileError(Exception):
    """Base class of every error tilenb raises for bad user input.

    Attributes: `message` (str), `line`, `column` (1-based ints, or None for errors with no
    source position such as launch errors), `filename` (str), `source_line` (the text of that
    line, or None), `diagnostics` (list of TileError: all errors found, sorted by position).
    """

    kind = "error"

    def __init__(self, message: str, line: Optional[int] = None, column: Optional[int] = None,
                 filename: str = "<cell>", source_line: Optional[str] = None):
        self.message = message
        self.line = line
        self.column = column
        self.filename = filename
        self.source_line = source_line
        self.diagnostics: List["TileError"] = [self]
        super().__init__(message)

    def format_one(self) -> str:
        if self.line is None:
            return f"{self.filename}: error: {self.message}"
        head = f"{self.filename}:{self.line}:{self.column}: error: {self.message}"
        if self.source_line is None:
            return head
        text = self.source_line.rstrip("\r\n").expandtabs(1)
        at = max(0, (self.column or 1) - 1)
        if len(text) > SHOWN_LINE:
            # a long line is shown as the stretch around the column, marked "..." where cut
            start = max(0, min(at - SHOWN_LINE // 2, len(text) - SHOWN_LINE))
            end = start + SHOWN_LINE
            text = ("..." if start else "") + text[start:end] + ("..." if end < len(text) else "")
            at = at - start + (3 if start else 0)
        caret = " " * at + "^"
        return f"{head}\n    {text}\n    {caret}"

    def __str__(self) -> str:
        return "\n".join(d.format_one() for d in self.diagnostics)

    def _render_traceback_(self):
        """IPython shows a tilenb error as its message alone: the frames inside tilenb's launch
        checks tell a notebook user nothing that the message does not."""
        return [f"{type(self).__name__}: {self}"]

    def __reduce__(self):  # picklable, for multiprocessing and caching
        return (type(self), (self.message, self.line, self.column, self.filename, self.source_line))


class TileSyntaxError(TileError):
    """The source does not follow the grammar."""


class TileNameError(TileError):
    """A name is undefined, defined twice, or used as the wrong kind of thing."""


class TileTypeError(TileError):
    """Types do not fit: a mismatch, arithmetic on storage-only types, bool conversions."""


class TileShapeError(TileError):
    """Tile shapes do not broadcast, `dot` dimensions differ, a tile's size is not constant."""


class TileRuleError(TileError):
    """A rule of the language is broken: control flow, functions, attributes, uniformity."""


class TileBudgetError(TileError):
    """The tiles alive at once need more shared memory than the kernel may have."""


class LaunchError(TileError):
    """A kernel launch was refused before anything ran: the arguments or grid do not fit."""


class UnsupportedError(TileError):
    """A valid program uses something a backend cannot run yet."""


class RaceError(LaunchError):
    """Debug launch: two threads of a CTA touched one shared-tile element, at least one of them
    writing, with no barrier() between. Names the kernel, line, threads and element."""


class OutOfBoundsError(LaunchError):
    """Debug launch: a per-thread element read or write fell outside its tensor, tile or view."""


class EdgeWarning(UserWarning):
    """Debug launch (a warning, not an error: it can be intended): a tile store left elements of
    its tensor unwritten, inside its window because its value is invalid there (the message names
    the operand and line that made it so), or outside every store's window. The same text is in
    `kernel.last_run.notes`."""


class Source:
    """A source text and its name, for turning spans into positioned errors."""

    def __init__(self, text: str, filename: str = "<cell>", line_offset: int = 0):
        self.text = text
        self.filename = filename
        self.lines = text.split("\n")  # lines end at "\n" only, as the lexer counts them
        self.line_offset = line_offset  # added to reported lines (a cell's magic line, say)

    def error(self, cls, message: str, line: Optional[int], column: Optional[int]) -> TileError:
        src = None
        if line is not None and 1 <= line <= len(self.lines):
            src = self.lines[line - 1]
        shown = None if line is None else line + self.line_offset
        return cls(message, shown, column, self.filename, src)


def combine(errors: Sequence[TileError]) -> TileError:
    """Sort errors by position, drop exact duplicates, and return the first carrying them all."""
    seen = set()
    unique = []
    for e in sorted(errors, key=lambda e: (e.line or 0, e.column or 0)):
        key = (e.line, e.column, e.message)
        if key not in seen:
            seen.add(key)
            unique.append(e)
    first = unique[0]
    first.diagnostics = unique
    return first
