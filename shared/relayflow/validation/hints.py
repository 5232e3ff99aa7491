"""How a refusal teaches: the closest allowed names, and words for the patterns a field takes.

Every message that says a name is unknown ends with :func:`did_you_mean` (the nearest
allowed names by similarity, or the allowed ones when none is near), so a typo gets its fix
and a guess gets the list. :func:`pattern_in_words` says in words what a regular expression
of the definition format allows, so no message shows a raw regex alone.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

#: How many allowed names a message lists when none is close.
LISTED = 20


def did_you_mean(name: str, allowed: Iterable[str], *, cutoff: float = 0.6) -> str:
    """``"; did you mean 'table'?"``, or ``"; one of: a, b, c"`` (at most :data:`LISTED`, then
    ``…``), or ``""`` when nothing is allowed."""
    choices = sorted({str(a) for a in allowed})
    close = difflib.get_close_matches(name, choices, n=3, cutoff=cutoff)
    if not close:
        lowered = {c.lower(): c for c in choices}
        if name.lower() in lowered:
            close = [lowered[name.lower()]]
    if close:
        return "; did you mean " + " or ".join(repr(c) for c in close) + "?"
    if not choices:
        return ""
    shown = ", ".join(choices[:LISTED]) + (", …" if len(choices) > LISTED else "")
    return f"; one of: {shown}"


def time_zone_hint(tz: str) -> str:
    """The nearest IANA zone names to ``tz`` (``Europe/Berlinn`` → ``Europe/Berlin``)."""
    from zoneinfo import available_timezones

    names = available_timezones()
    hint = did_you_mean(tz, names, cutoff=0.75)
    if hint.startswith("; did you mean"):
        return hint
    return "; use an IANA name such as Europe/Berlin, America/New_York or UTC"


#: The patterns of the definition format, in words.
PATTERN_WORDS = {
    r"^[a-z][a-z0-9_]*$": "lower-case letters, digits and _, starting with a letter",
    r"^[a-z0-9][a-z0-9_-]*$": "lower-case letters, digits, - and _, starting with a letter "
    "or digit",
    r"^([a-z0-9][a-z0-9_-]*|.*\{\{.*\}\}.*)$": "lower-case letters, digits, - and _ "
    "(starting with a letter or digit), or a {{ template }}",
    r"^[a-z0-9][a-z0-9-]{2,63}$": "3 to 64 lower-case letters, digits and -, starting with a "
    "letter or digit",
    r"^[A-Za-z][A-Za-z0-9_.]*$": "letters, digits, _ and ., starting with a letter",
    r"^[A-Za-z0-9][A-Za-z0-9-]*$": "letters, digits and -, starting with a letter or digit",
    r"^(aws|http)\.[a-z0-9_-]+(\.[a-z0-9_]+)?$": "aws.<service>.<operation> or "
    "http.<tool>[.<operation>]",
    r"^https?://": "an http:// or https:// URL",
}


def pattern_in_words(pattern: str) -> str:
    """What ``pattern`` allows, in words (the pattern itself when it is not one of ours)."""
    words = PATTERN_WORDS.get(pattern)
    return words if words is not None else f"text matching the regular expression {pattern}"
