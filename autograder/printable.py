"""Text that may hold what a student chose, made safe to show a person.

A file name in a submission, an exchange folder's name or a student's message can hold
any character but ``/`` and NUL: control sequences that set a terminal's title or
clipboard, erase a line or hide the rest of the screen, a newline that starts a forged
line, bidirectional overrides that reorder it. None of them reaches the instructor's
terminal, a log, ``report.csv`` or the ledger as itself: ``printable`` writes every
character that is not printable as its escape (``\\x1b``, ``\\n``, ``\\u202e``), as
``repr`` would, and leaves every other character, accents included, as it is.
"""

from __future__ import annotations


def printable(text: str) -> str:
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in text)
