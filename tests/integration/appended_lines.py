"""The whole lines of a file that worker processes append to while a test reads it.

Each worker appends a line with one ``O_APPEND`` write, but a reader is not held
off while that write copies its bytes: a line that crosses a page boundary can
be seen half written (the file grows page by page). So the last line, until its
newline has arrived, is left for the next read: a complete line is never
dropped, and a half one is never parsed.
"""

from __future__ import annotations

from pathlib import Path


def whole_lines(path: Path) -> list[str]:
    """``path``'s lines that end with their newline, in file order."""
    text = path.read_text()
    return text[:text.rfind("\n") + 1].splitlines()
