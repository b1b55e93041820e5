"""A change description is searched without the template around it (retrieval/description.py)."""

from __future__ import annotations

import time

import pytest

from delphi_ls.retrieval.description import clean_request
from delphi_ls.retrieval.query import analyse

PR = """feat: replace debug module with node:util debuglog

Use `util.debuglog` so that the `debug` dependency can go.

## Checklist

- [x] I have ensured my pull request is not behind the main or master branch
- [ ] I have added tests

closes #1834, #1882
See https://github.com/koajs/koa/issues/1913 for the history.
<!-- Describe your change above this line -->
* [pre-commit.ci] auto fixes from pre-commit.com hooks

for more information, see https://pre-commit.ci

Co-authored-by: Copilot <175728472+Copilot@users.noreply.github.com>
Signed-off-by: A Dev <dev@example.org>
"""


def test_template_links_trailers_and_bot_lines_are_dropped() -> None:
    out = clean_request(PR)
    assert out.startswith("feat: replace debug module with node:util debuglog")
    assert "Use `util.debuglog` so that the `debug` dependency can go." in out
    for gone in ("Checklist", "ensured", "closes", "1834", "github", "Describe", "pre-commit", "Copilot",
                 "Signed-off-by", "example.org", "more information"):
        assert gone not in out, gone
    assert "See for the history." in out  # prose around a link stays


def test_prose_that_starts_like_a_trailer_stays() -> None:
    text = "Fixes a panic when the timestamp is out of range\nClose the reader when the body ends"
    assert clean_request(text) == text


def test_the_question_keeps_its_words_and_loses_the_noise() -> None:
    q = analyse("Which source files implement this change?\n" + PR)
    assert {"debuglog", "util", "debug"} <= set(q.terms)
    assert not {"github", "com", "ensured", "checklist", "copilot", "koajs"} & set(q.terms)
    assert not any("github" in p for p in q.paths)


def test_a_trace_is_not_cleaned() -> None:
    trace = ('Traceback (most recent call last):\n  File "app/retry.py", line 12, in run\n'
             "    see https://example.org/docs\nValueError: closes #12 failed")
    q = analyse(trace)
    assert q.shape == "trace" and q.text == trace


def test_nothing_but_noise_keeps_the_text() -> None:
    assert clean_request("Co-authored-by: A <a@b.c>") == "Co-authored-by: A <a@b.c>"


def test_what_a_request_names_survives_the_cleaning() -> None:
    text = ("[ci] run the matrix on 3.13\npin lodash@4.17.21 for now\n"
            "see https://github.com/o/r/blob/main/src/retry.py#L12 for it\n"
            "cc: this should also cover the cache\n"
            "- [x] Add RetryPolicy.jitter to retry.py\n- [x] I have added tests\n- [ ] Update `docs/retry.md`\n"
            "Cc: A Dev <dev@example.org>\ncc: @maintainer")
    out = clean_request(text)
    for kept in ("[ci] run the matrix", "lodash@4.17.21", "see src/retry.py for it", "cc: this should also",
                 "RetryPolicy.jitter to retry.py", "`docs/retry.md`"):
        assert kept in out, kept
    for gone in ("I have added tests", "dev@example.org", "@maintainer", "github.com"):
        assert gone not in out, gone
    assert "src/retry.py" in analyse("Which source files implement this change?\n" + text).paths


@pytest.mark.parametrize("text", [
    "payload " + "QUJD" * 12_500,  # 50 KB of base64
    "x" * 20_000, "w" * 10_000 + "@",
    "See " + ", ".join(f"https://e.org/{i}" for i in range(40)) + " then text",
    ("<!-- " + "a" * 1000) * 50,
])
def test_long_pasted_tokens_are_analysed_in_linear_time(text: str) -> None:
    """Each of these took 0.5-76 s before the patterns were bounded (review of session 5)."""
    t0 = time.perf_counter()
    analyse(text)
    assert time.perf_counter() - t0 < 0.5
