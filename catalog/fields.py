"""Field types every catalog file shares: strict numbers, clean text, safe ids.

Strict, because YAML is easy to get subtly wrong: ``true`` is not the integer
1, the string ``"false"`` is not a boolean, ``.nan`` and ``.inf`` are not
numbers anyone measured. Text is checked for what a reader cannot see: control
characters, bidirectional overrides (which make a name read differently from
what it is) and, outside notes, line breaks. Ids become URL path segments and
file names, so an id that would land on a list page or an asset (``index``,
``something.html``) is refused.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Annotated

from pydantic import AfterValidator, AllowInfNan, Strict, StrictBool, StringConstraints

Int = Annotated[int, Strict()]
Float = Annotated[float, Strict(), AllowInfNan(False)]  # an int is accepted and widened
Bool = StrictBool

# Unicode categories a displayed string may not contain: controls (Cc), format
# characters (Cf: the bidi overrides U+202A-202E and isolates U+2066-2069, zero-width
# joiners, soft hyphens), line and paragraph separators, surrogates, private use
# and unassigned code points.
_HIDDEN = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})


def _hidden(text: str, allow: str = "") -> str | None:
    """The first character of ``text`` a reader cannot see (outside ``allow``), described."""
    for ch in text:
        if ch not in allow and unicodedata.category(ch) in _HIDDEN:
            name = unicodedata.name(ch, "control character")
            return f"U+{ord(ch):04X} ({name.lower()})"
    return None


def _line(text: str) -> str:
    found = _hidden(text)
    if found:
        raise ValueError(f"{found} is not allowed (one line of plain text)")
    if text != text.strip():
        raise ValueError("leading or trailing whitespace is not allowed")
    return text


def _note(text: str) -> str:
    # Notes may run over several lines; a plain newline is the only break kept.
    found = _hidden(text, allow="\n")
    if found:
        raise ValueError(f"{found} is not allowed (plain text; only newlines break lines)")
    return text


Name = Annotated[
    str, Strict(), StringConstraints(min_length=1, max_length=120), AfterValidator(_line)
]
Text = Annotated[str, Strict(), StringConstraints(max_length=500), AfterValidator(_line)]
Source = Annotated[
    str, Strict(), StringConstraints(min_length=4, max_length=500), AfterValidator(_line)
]
Note = Annotated[str, Strict(), StringConstraints(max_length=2000), AfterValidator(_note)]

# Ids: lower case, no slashes, no dot at the start, bounded length. Runtime ids
# may contain a dot (``llama.cpp``).
ID_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,79}$"
RESERVED_IDS = frozenset({"index"})
# A hub page is <folder>/<id>/index.html and a config page nests ids as folders:
# an id ending like a file the site writes would collide with that file.
_FILE_LIKE = re.compile(r"\.(html?|md|json|svg|xml|gz|js|css|txt|png|wasm)$")


def _id(value: str) -> str:
    if value in RESERVED_IDS:
        raise ValueError(f"{value!r} is reserved (it would replace a list page)")
    if _FILE_LIKE.search(value):
        raise ValueError(f"{value!r} ends like a file name the site writes")
    if ".." in value or "--" in value:
        raise ValueError("'..' and '--' are not allowed in an id")
    return value


EntityId = Annotated[str, Strict(), StringConstraints(pattern=ID_PATTERN), AfterValidator(_id)]
