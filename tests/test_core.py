"""The shared vocabulary: enums read as their strings, status lines read by state."""

from __future__ import annotations

import json

import pytest

from delphi_ls.core import KINDS, Kind, Shape, State, SymbolRecord, state_of


def test_enum_members_are_their_strings_on_the_wire() -> None:
    assert json.dumps({"kind": Kind.TEST, "shape": Shape.TRACE}) == '{"kind": "test", "shape": "trace"}'
    assert f"{Kind.DOC}" == "doc" and Kind.CODE == "code" and "test" in {Kind.TEST}
    assert KINDS == ("code", "test", "doc", "config", "other")


@pytest.mark.parametrize("line,state", [
    ("ready", State.READY),
    ("ready (not used for this query shape)", State.READY),
    ("ready: learned ranker delphi-ltr-2 (warm, window 50)", State.READY),
    ("partial: 3/5 chunks embedded", State.PARTIAL),
    ("off: vectors disabled by settings (vectors = false)", State.OFF),
    ("not ready: no vectors yet", State.NOT_READY),
    ("disabled: model mismatch: ...", State.DISABLED),
    ("error: git log failed: boom", State.ERROR),
    ("not computed yet (runs with indexing)", None),
    ("readying", None),
])
def test_state_of_a_status_line(line: str, state: State | None) -> None:
    assert state_of(line) == state


def test_symbol_record_reads_by_name_and_as_the_old_tuple() -> None:
    s = SymbolRecord("RetryPolicy", "class", "shipyard/retry.py", 5, 20, "")
    assert (s.name, s.path, s.line) == ("RetryPolicy", "shipyard/retry.py", 5) and s[2] == s.path


def test_token_string_is_the_joined_code_tokens():
    """The lexical stores' fields are made by token_string (each word's tokens cached); it must give what
    joining code_tokens gives, on every shape of word, the real chunks of this repository included."""
    from pathlib import Path

    from delphi_ls.core.tokens import code_tokens, token_string

    samples = ["getUserName grpc_proxy __init__ _private HTTPServerError x86_64 0x1F 12345",
               "a" * 64 + " " + "b" * 65 + " mixed_CamelCase_snake URLParser ÄÖÜ café naïve", "", "   \n\t",
               "def f(x):\n    return x + 1  # 42 things", "__ _ ___a___ A_B_C aBC ABc",
               "test_a_broken_history_ranker_is_an_error_in_health_and_the_plain_one_answers q8Wm3Zx7Lp2Vn5Rt9Ys4Bk6"
               "Hd1Fg0Jc8Ea3Ku7Niq8Wm3Zx7Lp2Vn5Rt9Ys4Bk6Hd1Fg0Jc8Ea3Ku7Ni " + "deadbeef0123" * 8]
    samples += [p.read_text(encoding="utf-8") for p in sorted(Path(__file__).parent.parent.glob("delphi_ls/**/*.py"))]
    for text in samples + samples:  # twice: the second time from the cache
        assert token_string(text) == " ".join(t for t, _pos in code_tokens(text))


def test_a_word_longer_than_64_characters_gives_its_parts_when_it_is_made_of_words():
    """A pytest name an agent pastes (76 characters) gave no token at all: bm25 and the file documents lost it and
    the only file defining it ranked 17th (a newcomer, session 36). A blob (base64, hex) still gives none."""
    from delphi_ls.core.tokens import query_terms, token_string

    name = "test_a_broken_history_ranker_is_an_error_in_health_and_the_plain_one_answers"
    assert token_string(name) == ("test a broken history ranker is an error in health and the plain one answers")
    assert query_terms(f"why does {name} fail?") == ["test", "broken", "history", "ranker", "error", "health",
                                                     "plain", "answers", "fail"]
    assert token_string("q8Wm3Zx7Lp2Vn5Rt9Ys4Bk6Hd1Fg0Jc8Ea3Ku7Niq8Wm3Zx7Lp2Vn5Rt9Ys4Bk6Hd1Fg0Jc8Ea3Ku7Ni") == ""
    assert token_string("d41d8cd98f00b204e9800998ecf8427e" * 3) == ""
    assert token_string("x" * 65) == ""
    assert token_string("JBSWY3DPEHPK3PXP" * 5) == ""  # base32 (a review: 65% of random ones gave parts)
    assert token_string("SETTING_" * 9) == "setting " * 8 + "setting"  # a long constant is made of words


def test_cancellation_is_checked_only_inside_a_cancellable_request():
    """core.cancel: a check outside a request never raises; inside, a set event stops a wait early."""
    import threading
    import time

    from delphi_ls.core import cancel

    never = threading.Event()
    cancel.check()
    assert cancel.wait(never, 0.01) is False  # outside: a plain wait
    event = threading.Event()
    with cancel.cancellable(event):
        cancel.check()
        threading.Timer(0.1, event.set).start()
        t0 = time.monotonic()
        with pytest.raises(cancel.Cancelled):
            cancel.wait(never, 5.0)
        assert time.monotonic() - t0 < 1.0
    cancel.check()  # the request's end takes its event away
