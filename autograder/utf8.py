"""Text that UTF-8 can carry: every string read from a kernel, lone surrogates mended.

A Python string, and JSON's ``\\ud800`` escape, can hold a lone surrogate: half of a
UTF-16 pair, a code point that no UTF-8 encoder writes ("surrogates not allowed"). A
student's kernel can put one in any message it sends or any reply of the bridge; each later
step that writes text (a Jupyter message to the test kernel, the graded notebook, a
feedback page) then raised. Where that step was a test's own error output, the test cell
was left with no error, which nbgrader scores as a pass (attack 33: an empty notebook got
full marks). So text is mended where it is parsed, before anything reads it: each lone
surrogate becomes U+FFFD, the replacement character, as a UTF-8 decoder does with bytes it
cannot read. A valid pair (an emoji written as two escapes) is one character by then, and
is kept.
"""

from __future__ import annotations

import json
import re

REPLACEMENT = "\ufffd"
_LONE = re.compile("[\ud800-\udfff]")
# Where a lone surrogate can come from in JSON text: an escape of one (the first half of a
# pair too: whether its second half follows is the decoder's to see), or, in text that is
# already a Python string, the character itself.
_IN_JSON_BYTES = re.compile(rb"\\u[dD][89a-fA-F]")
_IN_JSON_TEXT = re.compile(r"\\u[dD][89a-fA-F]|[\ud800-\udfff]")


def may_hold_surrogates(json_text: str | bytes) -> bool:
    """False when no value parsed from ``json_text`` can hold a lone surrogate (a C-speed
    search, so that most messages are never walked)."""
    if isinstance(json_text, str):
        return _IN_JSON_TEXT.search(json_text) is not None
    return _IN_JSON_BYTES.search(json_text) is not None


def carries(value) -> bool:
    """True when UTF-8 can carry every string of ``value`` (parsed JSON)."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def mended_text(text: str) -> str:
    return text if text.isascii() else _LONE.sub(REPLACEMENT, text)


def mend(value):
    """``value`` (parsed JSON: dicts, lists, strings, numbers) with every lone surrogate in
    its strings and keys replaced by U+FFFD; dicts and lists are changed in place. Two keys
    that differ only there become one (the later value kept)."""
    if type(value) is str:
        return mended_text(value)
    stack = [value]
    while stack:  # not recursive: a kernel's message may nest deeper than Python's stack
        item = stack.pop()
        if type(item) is dict:
            for key in [k for k in item if type(k) is str and _LONE.search(k)]:
                item[mended_text(key)] = item.pop(key)
            pairs = item.items()
        elif type(item) is list:
            pairs = enumerate(item)
        else:
            continue
        for key, inner in pairs:
            if type(inner) is str:
                if not inner.isascii():
                    item[key] = mended_text(inner)
            elif type(inner) is dict or type(inner) is list:
                stack.append(inner)
    return value
