"""A change description cleaned before it is searched: the request, without the template around it.

Pull-request bodies and squash-merge messages carry text no question is about: links, e-mail
addresses, `Co-authored-by:` and other trailers, checklists from PR templates ("- [x] I have
ensured my pull request..."), HTML comments, template headings ("## Checklist"), issue numbers and
bot lines ("[pre-commit.ci] auto fixes from pre-commit.com hooks"). Their words (`github`, `com`,
`ensured`, `checklist`, `copilot`) match licence headers, CI files and docs, not the code the
change is about. Traces are not cleaned: their log lines are the question.
"""

from __future__ import annotations

import re

# Whole lines that are template or bot text, not the request.
_LINES = re.compile(
    r"^[ \t]*(?:"
    r"(?:co-authored-by|signed-off-by|reviewed-by|acked-by|tested-by|reported-by|helped-by|cc|change-id):.*"
    r"|(?:[-*+][ \t]*)?(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?|refs?|see(?: also)?)[ \t:]+_REF(?:[ \t,]+(?:and[ \t]+)?_REF)*[ \t.]*"
    r"|[-*+][ \t]*\[[ xX]\].*"  # checklist items
    r"|#{1,6}[ \t]*(?:checklist|summary|description|motivation|context|test(?:ing)? plan|testing|changes|"
    r"screenshots?|related issues?|type of change|checks?|notes?)[ \t:]*"  # template headings
    r"|[-*+]?[ \t]*\[[\w.-]*(?:bot|ci)\][^\n]*"  # bot lines: [pre-commit.ci] auto fixes ...
    r"|for more information, see\b.*"  # what pre-commit.ci appends
    r")$".replace("_REF", r"(?:#\d+|GH-\d+|https?://\S+|[\w.-]+/[\w.-]+#\d+)"), re.I | re.M)
_INLINE = re.compile(r"<!--.*?-->|https?://\S+|www\.\S+|[\w.+-]+@[\w-]+\.[\w.-]+|(?<![\w/])(?:GH-|#)\d+\b",
                     re.S | re.I)
_BLANKS = re.compile(r"\n[ \t]*(?:\n[ \t]*)+")
_SPACES = re.compile(r"(?<=\S)[ \t]{2,}(?=\S)")


def clean_request(text: str) -> str:
    """``text`` without links, e-mail addresses, trailers, checklists, template headings, issue
    numbers and bot lines; the rest (title, prose, code, quoted names) as written."""
    out = _LINES.sub("", text)
    out = _SPACES.sub(" ", _INLINE.sub(" ", out))
    out = _BLANKS.sub("\n", out).strip()
    return out or text.strip()
