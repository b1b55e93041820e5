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

# Whole lines that are template or bot text, not the request. Every repetition is bounded by a
# character class that cannot overlap its neighbour (a link stops at a comma): a line of 20 links
# joined by commas took 4 s when a link could swallow the comma.
_REF = r"(?:#\d+|GH-\d+|https?://[^\s,]+|[\w.-]+/[\w.-]+#\d+)"
_LINES = re.compile(
    r"^[ \t]*(?:"
    r"(?:co-authored-by|signed-off-by|reviewed-by|acked-by|tested-by|reported-by|helped-by|change-id):.*"
    r"|cc:[^\n]*@[^\n]*"  # `Cc: A <a@b.org>`, `cc: @maintainer`; not prose that starts with "cc:"
    r"|(?:[-*+][ \t]*)?(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?|refs?|see(?: also)?)[ \t:]+_REF"
    r"(?:[ \t]*,?[ \t]*(?:and[ \t]+)?_REF)*[ \t.]*"
    r"|#{1,6}[ \t]*(?:checklist|summary|description|motivation|context|test(?:ing)? plan|testing|changes|"
    r"screenshots?|related issues?|type of change|checks?|notes?)[ \t:]*"  # template headings
    r"|[-*+]?[ \t]*\[[\w.-]*(?:bot|[.-]ci)\][^\n]*"  # bot lines: [pre-commit.ci] auto fixes ...; not a [ci] tag
    r"|for more information, see\b.*"  # what pre-commit.ci appends
    r")$".replace("_REF", _REF), re.I | re.M)
_CHECKLIST = re.compile(r"^[ \t]*[-*+][ \t]*\[[ xX]\][ \t]*(.*)$", re.M)
# A link to a file in a repository keeps its path: `.../blob/main/src/retry.py#L12` -> `src/retry.py`.
_FILE_LINK = re.compile(r"https?://[^\s/]+/[^\s]*?/(?:blob|tree|raw)/[^\s/]+/([^\s#?)\]>]+)[^\s)\]>]*")
# Links, e-mail addresses (`a@b.org`, not `lodash@4.17.21`), HTML comments, issue numbers. The
# look-behind starts an address only where a word starts (10 KB of word characters took 4 s without it).
_INLINE = re.compile(r"<!--.*?-->|https?://\S+|www\.\S+|(?<![\w.+-])[\w.+-]+@[\w-]+(?:\.[\w-]+)*\.[A-Za-z]{2,}\b"
                     r"|(?<![\w/])(?:GH-|#)\d+\b", re.S | re.I)
_BLANKS = re.compile(r"\n[ \t]*(?:\n[ \t]*)+")
_SPACES = re.compile(r"(?<=\S)[ \t]{2,}(?=\S)")
_CODEISH = re.compile(r"`|[A-Za-z]\w*(?:_\w+|\.\w+|[a-z][A-Z]\w*)|\w+\(\)|\w/\w")


# Cleanings (setting ``clean_description``): "basic" is the above (session 5); "squash" (the default since
# session 9) also drops what a squash-merge and a wrapped template leave behind (below); "off" searches the
# text as written.
CLEANINGS = ("squash", "basic", "off")
# A checklist item with the lines a template wraps it onto: they run until a blank line, the next list
# item or a heading ("- [x] I have ensured my pull request is not behind the main or master\nbranch of the
# original repository." left "branch", "request", "context" behind, words that name koa's request.js).
_CHECKLIST_WRAPPED = re.compile(r"^[ \t]*[-*+][ \t]*\[[ xX]\][ \t]*(.*(?:\n(?![ \t]*(?:[-*+][ \t]|\d+[.)][ \t]|#|\n|$))"
                                r"[^\n]*)*)$", re.M)
# A squash-merge's housekeeping commits, one per bullet: the change log, review suggestions, merges of the
# base branch, formatting runs, reverts. Their words (changelog, news, fragment, suggestion, branch, lint)
# name no code; a bullet that says anything else stays.
_HOUSEKEEPING = re.compile(
    r"^[ \t]*[-*+][ \t]+(?:"
    r"(?:add(?:ed|s)?|update[sd]?|fix(?:e[sd])?|amend(?:ed)?|tweak(?:ed)?)[ \t]+(?:the[ \t]+|an?[ \t]+)?"
    r"(?:changelog|change[ \t]+log|changes|news|history|release[ \t]+notes?|whats?[ \t]*new)"
    r"(?:\.(?:md|rst|txt))?(?:[ \t]+(?:entry|entries|fragment|file|item|note))?"
    r"|add(?:ed|s)?[ \t]+(?:a[ \t]+)?(?:news|changelog)[ \t]+(?:fragment|entry)"
    r"|apply(?:ing)?[ \t]+suggestions?[ \t]+from[^\n]*"
    r"|merge[ \t]+(?:remote-tracking[ \t]+)?branch[^\n]*"
    r"|(?:run[ \t]+|apply[ \t]+|fix(?:ed)?[ \t]+)?(?:lint(?:ing)?|format(?:ting)?|style|typos?|formatter)(?:[ \t]+fix(?:es)?)?"
    r"|revert[ \t]+\"[^\n]*\"[^\n]*"
    r")[ \t.!]*$", re.I | re.M)
# `This reverts commit 5b41...`: git's line under a revert. (Commit hashes elsewhere stay: removing them
# from every line moved one ARB v0_1 question's gold test from rank 1 to 2 and helped none; RESULTS.md.)
_REVERTS = re.compile(r"^[ \t]*this reverts commit [0-9a-f]{7,40}\.?[ \t]*$", re.I | re.M)
# Rules that a squash-merge leaves: `---------` before the trailers.
_RULE = re.compile(r"^[ \t]*-{3,}[ \t]*$", re.M)


def _checklist_item(m: re.Match[str]) -> str:
    """A PR template's checklist item goes ("I have added tests"); a task that names code stays."""
    return m.group(0) if _CODEISH.search(m.group(1)) else ""


def clean_request(text: str, cleaning: str = "squash") -> str:
    """``text`` without links (a file link keeps its path), e-mail addresses, trailers, template
    checklists and headings, issue numbers and bot lines; the rest (title, prose, code, names) as written.
    ``cleaning`` (``CLEANINGS``): "squash" also drops a checklist item's wrapped lines, a squash-merge's
    housekeeping bullets, revert lines and `---` rules; "basic" does not; "off" returns the text."""
    if cleaning == "off":
        return text
    out = _FILE_LINK.sub(lambda m: " " + m.group(1) + " ", text)
    out = _LINES.sub("", out)
    if cleaning == "squash":
        out = _CHECKLIST_WRAPPED.sub(_checklist_item, out)
        out = _HOUSEKEEPING.sub("", out)
        out = _REVERTS.sub("", out)
        out = _RULE.sub("", out)
    out = _CHECKLIST.sub(_checklist_item, out)
    out = _SPACES.sub(" ", _INLINE.sub(" ", out))
    out = _BLANKS.sub("\n", out).strip()
    return out or text.strip()
