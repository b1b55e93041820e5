"""Questions and code beyond English, as a team in Shanghai, Tokyo, Seoul or Berlin writes them (a newcomer, session
41): an identifier with no space around it in a Chinese or Japanese sentence, a question in Chinese only, full-width
letters, curly and corner quotes, file names in other scripts, a name too long for the file system. A small real
workspace, the real engine (lexical branches only, so what is asserted is what words and names find)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from delphi_ls import Engine
from delphi_ls.core.tokens import stripped, words_of
from delphi_ls.retrieval.query import analyse

FILES = {
    "lager/config/loader.py": '"""Reading the settings file."""\n\n\ndef parse_config(path):\n'
                              '    # 解析配置文件: Windows 的路径用反斜杠\n    return open(path).read().split("\\n")\n',
    "lager/config/__init__.py": '"""The configuration package: defaults and the environment."""\n\nDEFAULTS = {"retries": 3}\n',
    "lager/pricing/discount.py": '"""Discounts."""\n\n\ndef apply_discount(price, rate):\n'
                                 '    # 计算折扣后的价格\n    return price * (1 - rate)\n',
    "lager/pricing/errors.py": 'class PricingError(Exception):\n    """Raised with the message "rate out of range"."""\n\n\n'
                               'def check_rate(rate):\n    if not 0 <= rate <= 1:\n'
                               '        raise PricingError("rate out of range")\n',
    "lager/计算.py": "def 计算(x):\n    return x * 2\n",
    "lager/设置.py": "def 设置():\n    return 2\n",
    "lager/grüße.py": "def grüße():\n    return 1\n",
    "lager/größe.py": "def größe():\n    return 3\n",
    "tests/test_计算.py": "from lager.计算 import 计算\n\n\ndef test_计算():\n    assert 计算(1) == 2\n",
    "tests/test_größe.py": "from lager.größe import größe\n\n\ndef test_größe():\n    assert größe() == 3\n",
}


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("intl") / "ws"
    for rel, text in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    with Engine(root, index_dir=str(root.parent / "idx"), vectors=False, reranker="off") as eng:
        eng.index()
        yield root, eng


def _top(eng: Engine, q: str) -> dict:
    return eng.context(q, limit=5)["results"][0]


def test_an_identifier_written_into_a_chinese_or_japanese_sentence_is_searched_as_a_name(ws):
    _root, eng = ws
    assert words_of("为什么parse_config在Windows上失败") == ["为什么", "parse_config", "在", "Windows", "上失败"]
    for q in ("为什么parse_config在Windows上失败？", "parse_configが失敗する理由", "parse_config를 왜 실패하나요"):
        assert analyse(q).identifiers == ["parse_config"], q
        top = _top(eng, q)
        assert top["path"] == "lager/config/loader.py" and "symbol" in top["branches"], (q, top)


def test_an_underscore_joins_latin_and_cjk_into_one_name(ws):
    _root, eng = ws
    assert words_of("def test_计算(): get_用户名") == ["def", "test_计算", "get_用户名"]
    # (Where such a name ends inside a sentence cannot be told: `test_计算失败` stays one word; a space ends it.)
    assert analyse("为什么test_计算 会失败").identifiers == ["test_计算"]
    assert eng.context("为什么test_计算 会失败", limit=3)["results"][0]["path"] == "tests/test_计算.py"
    # A sentence of more than 64 characters with no space still gives its character pairs.
    assert "配置" in analyse("在这个项目里面我们想知道到底是哪一个模块负责读取并且解析配置文件然后把结果交给其他的服务使用呢").terms


def test_a_question_in_chinese_alone_finds_the_comment_that_says_it(ws):
    _root, eng = ws
    # No word of it is spelt apart in Chinese: pairs of characters are the words both sides share (配置, 文件, 解析).
    assert _top(eng, "配置文件解析在哪里？")["path"] == "lager/config/loader.py"
    assert _top(eng, "折扣后的价格在哪里")["path"] == "lager/pricing/discount.py"


def test_full_width_letters_are_the_ascii_name(ws):
    _root, eng = ws
    q = "为什么ｐａｒｓｅ＿ｃｏｎｆｉｇ会失败"
    assert analyse(q).identifiers == ["parse_config"]
    assert _top(eng, q)["path"] == "lager/config/loader.py"
    assert [s["name"] for s in eng.symbols("ｐａｒｓｅ＿ｃｏｎｆｉｇ")] == ["parse_config"]


@pytest.mark.parametrize("q", ["warum „rate out of range“?", "почему «rate out of range»", "为什么报「rate out of range」",
                               "why “rate out of range” here"])
def test_curly_low_angle_and_corner_quotes_mark_a_string_to_find(ws, q):
    _root, eng = ws
    assert analyse(q).literals == ["rate out of range"]
    assert _top(eng, q)["path"] == "lager/pricing/errors.py"


def test_file_names_in_other_scripts_are_named_after_their_own_stems_only(ws):
    _root, eng = ws
    assert stripped("größe") != stripped("grüße") and stripped("设置") == "设置"
    assert [t["path"] for t in eng.related_tests("lager/计算.py")] == ["tests/test_计算.py"]
    assert [t["path"] for t in eng.related_tests("lager/größe.py")] == ["tests/test_größe.py"]
    assert eng.related_tests("lager/设置.py") == []  # was test_计算.py, "named after 设置.py": both stems were ""
    assert eng.related_tests("lager/grüße.py") == []  # was test_größe.py: both were "gre"


def test_a_file_name_too_long_for_the_file_system_is_a_one_line_error(ws):
    root, _eng = ws
    long_name = "lager/" + "长" * 90 + ".py"  # 270 bytes: ENAMETOOLONG from the file system
    for args in (["related-tests", str(root), long_name], ["context", str(root), "x", "--anchor", long_name]):
        res = subprocess.run([sys.executable, "-m", "delphi_ls.cli", *args], capture_output=True, text=True,
                             cwd=root.parent, timeout=120)
        assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
        assert res.stderr.startswith("delphi: error:") and len(res.stderr.strip().splitlines()) == 1
