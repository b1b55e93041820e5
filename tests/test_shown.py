"""What every text front prints of a workspace's names and text (delphi_ls/shown.py)."""

from __future__ import annotations

from delphi_ls.shown import fence, fence_lang, shown, shown_text


def test_separators_and_bidi_controls_show_as_text() -> None:
    # U+2028 splits a line for str.splitlines(); U+202E reverses what follows ("trojan source").
    name = "evil\u2028SECRET\u202etxt.py\u2066x\u2069"
    out = shown(name)
    assert out == "evil\\u2028SECRET\\u202etxt.py\\u2066x\\u2069"
    assert len(out.splitlines()) == 1
    assert shown_text("a\tb\nc\u2029d") == "a\tb\nc\\u2029d"
    assert shown("x\u061cy") == "x\\u061cy"  # the Arabic letter mark, a bidi control too
    assert shown("naïve/日本.py") == "naïve/日本.py"  # letters are not controls


def test_a_fence_outlasts_any_backtick_run_and_the_info_string_is_a_word() -> None:
    assert fence("x = 1") == "```"
    assert fence("````md\n```sh\n````") == "`````"
    assert fence_lang("src/main.go") == "go" and fence_lang("a.b/c.tsx") == "tsx"
    assert fence_lang("Makefile") == "" and fence_lang("a.b/Makefile") == ""
    assert fence_lang("evil.\n```\n2. SECRET") == "" and fence_lang("x.py `x`") == ""
