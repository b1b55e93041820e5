"""Golden rankings, in the manner of zoekt's ``internal/e2e/e2e_rank_test.go``.

Each question asked of a fixture workspace (tests/fixtures/<fixture>/) has a text file under
tests/golden/<fixture>/<slug>.txt holding its full top 10 -- rank, path, kind, every branch with its
rank, and the why-line -- once with the rerankers off and once with the default learned ranker. Any
reorder, a branch that stops finding a file, or a changed reason fails with a unified diff. A change
that is meant to move rankings is made with

    pytest tests/test_rank_golden.py --update-goldens

and the rewritten files are reviewed (and committed) as a diff beside the code. ``rank-stats.txt``
holds recall@1, recall@5 and MRR of the expected answers, so a review sees the sum as well as the rows.

Vectors are off: HNSW answers vary from process to process, so only the deterministic branches are
pinned here (the vector branch is measured by the dev sets in bench/).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from delphi_ls import Engine
from tests.conftest import build_workspace, copy_fixture

GOLDEN = Path(__file__).parent / "golden"
TOP = 10
# The two rankings pinned per question: fused order alone, and the shipped default reranker on top.
MODES: tuple[tuple[str, str], ...] = (("reranker: off", "off"), ("reranker: ltr", "ltr"))


@dataclass(frozen=True)
class Q:
    """One golden question: what is asked, from where, and the file that answers it (for rank-stats)."""

    query: str
    answer: str
    anchors: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()
    slug: str = field(default="")

    def name(self) -> str:
        return self.slug or slugify(self.query)


def slugify(text: str) -> str:
    words = re.findall(r"[a-z0-9]+", text.lower())
    out = ""
    for w in words:
        if len(out) + len(w) + 1 > 60:
            break
        out = f"{out}-{w}" if out else w
    return out


TRACE = ('Traceback (most recent call last):\n  File "/home/ci/shipyard/shipyard/retry.py", line 27, in with_backoff\n'
         '    raise RuntimeError("upload failed after all retry attempts")\n'
         'RuntimeError: upload failed after all retry attempts')

LEDGER_TRACE = (
    'Traceback (most recent call last):\n  File "/srv/ledger/ledger/cli.py", line 19, in main\n'
    '    posted, problems = read_statement(args.file, account)\n'
    '  File "/srv/ledger/ledger/importers/csv_import.py", line 28, in read_statement\n'
    '    raise ImportProblem(1, f"missing columns: {\', \'.join(missing)}")\n'
    'ledger.importers.csv_import.ImportProblem: line 1: missing columns: amount')

RUBY_TRACE = (
    "/srv/mailbag/lib/mailbag/template.rb:22:in 'block in Mailbag::Template#render': "
    "no value for placeholder {{who}} (Mailbag::MissingPlaceholder)\n"
    "\tfrom /srv/mailbag/lib/mailbag/template.rb:20:in 'String#gsub'\n"
    "\tfrom /srv/mailbag/lib/mailbag/template.rb:20:in 'Mailbag::Template#render'\n")

PHP_TRACE = (
    "PHP Fatal error:  Uncaught InvalidArgumentException: cannot add USD to EUR in "
    "/var/www/invoice/src/Money/Money.php:57\nStack trace:\n"
    "#0 /var/www/invoice/src/Money/Money.php(37): Acme\\Invoice\\Money\\Money->assertSameCurrency()\n"
    "#1 /var/www/invoice/src/Support/HasTotals.php(23): Acme\\Invoice\\Money\\Money->plus()\n#2 {main}\n"
    "  thrown in /var/www/invoice/src/Money/Money.php on line 57\n")

KOTLIN_TRACE = (
    'Exception in thread "main" java.lang.IllegalArgumentException: a counter only goes up, got -1.0\n'
    "\tat com.example.tally.Counter.increment(Tally.kt:17)\n"
    "\tat com.example.tally.MainKt.main(Main.kt:5)\n")

C_TRACE = (
    "==4242==ERROR: AddressSanitizer: heap-use-after-free on address 0x602000000010 at pc 0x55d4c3a1b2c4\n"
    "READ of size 1 at 0x602000000010 thread T0\n"
    "    #0 0x55d4c3a1b2c4 in probe /home/ci/minikv/src/hash.c:43:12\n"
    "    #1 0x55d4c3a1b5e0 in hash_find /home/ci/minikv/src/hash.c:49:20\n"
    "    #2 0x55d4c3a1a9f1 in kv_get /home/ci/minikv/src/kv.c:35:21\n"
    "    #3 0x55d4c3a1a3b2 in main /home/ci/minikv/tests/test_kv.c:12:5\n")

CPP_TRACE = (
    'Thread 1 "tinylog_tests" received signal SIGSEGV, Segmentation fault.\n'
    "#0  0x00007ffff7e5a1c4 in fwrite () from /lib/x86_64-linux-gnu/libc.so.6\n"
    "#1  0x0000555555561f3a in tinylog::sinks::rotating_file_sink::log (this=0x5555555a4eb0, msg=...) "
    "at src/rotating_file_sink.cpp:41\n"
    "#2  0x000055555555f2d1 in tinylog::logger::log (this=0x7fffffffd8f0, lvl=tinylog::level::error, "
    'msg="disk full") at src/logger.cpp:21\n')

CSHARP_TRACE = (
    "System.ArgumentOutOfRangeException: Specified argument was out of the range of valid values. "
    "(Parameter 'maxAttempts')\n"
    "   at Pulse.Retry.RetryPolicy..ctor(Int32 maxAttempts, TimeSpan baseDelay) in "
    "/home/runner/work/pulse/src/Pulse/Retry/RetryPolicy.cs:line 10\n"
    "   at Pulse.Core.EventBus..ctor(PulseOptions options) in /home/runner/work/pulse/src/Pulse/Core/EventBus.cs:line 17\n"
    "   at Program.<Main>$(String[] args) in /home/runner/work/pulse/samples/Program.cs:line 3\n")

# Every query shape (english, identifier, trace, test), anchored and not, code, tests, docs and config.
QUESTIONS: dict[str, tuple[Q, ...]] = {
    "shipyard": (
        Q("where is TLS set up for the gRPC proxy?", "proxy/grpc_proxy.go"),
        Q("exponential backoff with jitter between upload attempts", "shipyard/retry.py"),
        Q("which tests cover the retry policy?", "tests/test_retry.py", anchors=("shipyard/retry.py",)),
        Q("which tests cover grpc_proxy.go?", "proxy/grpc_proxy_test.go"),
        Q("NewGrpcProxy returns an error", "proxy/grpc_proxy.go"),
        Q("How is formatDuration implemented?", "web/src/format.js"),
        Q("topological_order of the BuildGraph", "engine/src/lib.rs"),
        Q("content-addressed cache key from bytes", "jvm/src/main/java/dev/shipyard/CacheKey.java"),
        Q(TRACE, "shipyard/retry.py", slug="traceback-runtimeerror-upload-failed-after-all-retry-attempts"),
        Q("priority queue of build jobs across workers", "shipyard/scheduler.py"),
        Q("BuildScheduler.next_job", "shipyard/scheduler.py"),
        Q("how are failed uploads retried? docs", "docs/retry.md"),
        Q("how many upload retries are configured", "config/settings.yaml"),
        Q("uploadArtifact ArtifactClient", "web/src/api.ts"),
        Q("where is the build badge component rendered", "web/src/BuildBadge.tsx"),
        Q("tests for the build scheduler", "tests/test_scheduler.py"),
        Q("what changed in 1.2.0", "CHANGELOG.md"),
        Q("retry", "docs/retry.md", kinds=("doc",), slug="retry-kinds-doc"),
    ),
    "ledger": (
        Q("how are amounts rounded to the currency's minor unit?", "ledger/money.py"),
        Q("Money.parse", "ledger/money.py"),
        Q("which tests cover csv_import.py?", "tests/test_csv_import.py"),
        Q("what happens when a transaction does not balance", "ledger/accounts.py"),
        Q("tests for fetchBalances", "web/src/api/client.test.ts"),
        Q("which tests cover this?", "tests/test_money.py", anchors=("ledger/money.py",)),
        Q(LEDGER_TRACE, "ledger/importers/csv_import.py", slug="traceback-importproblem-missing-columns-amount"),
        Q("where is the balance chart drawn", "web/src/components/BalanceChart.tsx"),
        Q("how do I import a bank statement? docs", "docs/importing.md"),
        Q("how do I import a statement from my bank?", "docs/importing.md"),  # instructions: the guide (session 45)
        Q("how do I run the tests?", "CONTRIBUTING.md"),  # instructions about tests: the guide among them
        Q("duplicate rows in a statement are skipped", "ledger/importers/csv_import.py"),
        Q("UnbalancedTransaction", "ledger/accounts.py"),
        Q("unknown account 404", "web/src/api/client.ts"),
    ),
    "ruby": (
        Q("how are temporary SMTP failures retried?", "lib/mailbag/delivery/smtp.rb"),
        Q("Template render raises MissingPlaceholder", "lib/mailbag/template.rb"),
        Q("Outbox flush keeps failed messages", "lib/mailbag/delivery/outbox.rb"),
        Q("which tests cover this?", "test/template_test.rb", anchors=("lib/mailbag/template.rb",)),
        Q("specs for the smtp delivery", "spec/mailbag/delivery/smtp_spec.rb"),
        Q(RUBY_TRACE, "lib/mailbag/template.rb", slug="ruby-trace-missingplaceholder-in-template-render"),
        Q("parse a raw message with CRLF headers", "lib/mailbag/message.rb"),
        Q("default from address and max attempts", "lib/mailbag/configuration.rb"),
    ),
    "php": (
        Q("how is tax added to the invoice total?", "src/Invoice.php"),
        Q("Money::times rounds half up", "src/Money/Money.php"),
        Q("which currency has no minor unit digits", "src/Money/Currency.php"),
        Q("which tests cover FlatRateTax.php?", "tests/Tax/FlatRateTaxTest.php"),
        Q("which tests cover this?", "tests/Money/MoneyTest.php", anchors=("src/Money/Money.php",)),
        Q(PHP_TRACE, "src/Money/Money.php", slug="php-trace-cannot-add-usd-to-eur"),
        Q("render the invoice as HTML", "src/Render/HtmlRenderer.php"),
        Q("psr-4 autoload namespaces", "composer.json"),
    ),
    "kotlin": (
        Q("how are old samples evicted after the retention window?",
          "src/main/kotlin/com/example/tally/store/InMemoryStore.kt"),
        Q("PrometheusExporter typeName", "src/main/kotlin/export/PrometheusExporter.kt"),
        Q("MetricStore latest sample", "src/main/kotlin/com/example/tally/store/MetricStore.kt"),
        Q("which tests cover this?", "src/test/kotlin/com/example/tally/store/InMemoryStoreTest.kt",
          anchors=("src/main/kotlin/com/example/tally/store/InMemoryStore.kt",)),
        Q("tests for the prometheus exporter", "src/test/kotlin/com/example/tally/export/PrometheusExporterTest.kt"),
        Q(KOTLIN_TRACE, "src/main/kotlin/com/example/tally/Tally.kt", slug="kotlin-trace-counter-only-goes-up"),
        Q("invalid metric name", "src/main/kotlin/com/example/tally/model/Metric.kt"),
        Q("format a duration as hours minutes and seconds", "src/main/kotlin/com/example/tally/util/Time.kt"),
    ),
    "c": (
        Q("how does the hash table grow when it is three quarters full?", "src/hash.c"),
        Q("kv_del returns KV_ERR_NOTFOUND", "src/kv.c"),
        Q("connect to the server with a timeout", "src/net.c"),
        Q("which tests cover hash.c?", "tests/test-hash.c"),
        Q("which tests cover this?", "tests/test_kv.c", anchors=("src/kv.c",)),
        Q(C_TRACE, "src/hash.c", slug="c-asan-heap-use-after-free-in-probe"),
        Q("public API of the key-value store", "include/minikv/kv.h"),
    ),
    "cpp": (
        Q("how are log files rotated when they grow too large?", "src/rotating_file_sink.cpp"),
        Q("rotating_file_sink::calc_filename", "src/rotating_file_sink.cpp"),
        Q("ring buffer overwrites the oldest message", "include/tinylog/details/ring_buffer.hpp"),
        Q("which tests cover ring_buffer.hpp?", "tests/ring_buffer_unittest.cc"),
        Q("which tests cover this?", "tests/logger_test.cc", anchors=("src/logger.cpp",)),
        Q(CPP_TRACE, "src/rotating_file_sink.cpp", slug="cpp-gdb-sigsegv-in-rotating-file-sink-log"),
        Q("format pattern %l level name", "src/pattern_formatter.cc"),
    ),
    "csharp": (
        Q("where are events with no subscriber dead-lettered?", "src/Pulse/Core/EventBus.cs"),
        Q("RetryPolicy.DelayFor", "src/Pulse/Retry/RetryPolicy.cs"),
        Q("default maximum attempts before dead-lettering", "src/Pulse/Configuration/PulseOptions.cs"),
        Q("which tests cover this?", "test/Pulse.Tests/Core/EventBusTests.cs", anchors=("src/Pulse/Core/EventBus.cs",)),
        Q("specs for the retry policy", "test/Pulse.Tests/Retry/RetryPolicySpecs.cs"),
        Q(CSHARP_TRACE, "src/Pulse/Retry/RetryPolicy.cs", slug="csharp-trace-retrypolicy-ctor-out-of-range"),
        Q("unsubscribe by disposing the subscription", "src/Pulse/Core/Subscription.cs"),
    ),
}

# How each fixture becomes a workspace: shipyard with the hostile extras every other test indexes too.
BUILD: dict[str, Callable[[Path], Path]] = {
    "shipyard": build_workspace,
    "ledger": lambda root: copy_fixture("ledger", root),
    "ruby": lambda root: copy_fixture("ruby", root),
    "php": lambda root: copy_fixture("php", root),
    "kotlin": lambda root: copy_fixture("kotlin", root),
    "c": lambda root: copy_fixture("c", root),
    "cpp": lambda root: copy_fixture("cpp", root),
    "csharp": lambda root: copy_fixture("csharp", root),
}


def render(q: Q, answers: dict[str, dict]) -> str:
    """The golden text of one question: a header, then the top 10 under each reranker mode."""
    lines = [f"query: {q.query!r}"]
    if q.anchors:
        lines.append(f"anchors: {', '.join(q.anchors)}")
    if q.kinds:
        lines.append(f"kinds: {', '.join(q.kinds)}")
    lines.append(f"answer: {q.answer}")
    for label, mode in MODES:
        res = answers[mode]
        qi = res["query"]
        lines += ["", f"{label}  (shape {qi['shape']}; prefer {','.join(qi['prefer']) or '-'}; "
                      f"avoid {','.join(qi['avoid']) or '-'})"]
        for r in res["results"][:TOP]:
            branches = " ".join(f"{b}#{n}" for b, n in r["branches"].items())
            lines.append(f"{r['rank']:>2} {r['path']}  [{r['kind']}]  {branches}")
            lines.append(f"     why: {r['why']}")
        hidden = len(res["results"]) - TOP
        if hidden > 0:
            lines.append(f"   ({hidden} more)")
    return "\n".join(lines) + "\n"


def stats(fixture: str, found: dict[str, dict[str, list[str]]]) -> str:
    """Recall@1, recall@5 and MRR of the expected answers, per reranker mode, then each question's rank."""
    qs = QUESTIONS[fixture]
    out = [f"fixture: {fixture}  ({len(qs)} questions, top {TOP} pinned; vectors off)", ""]
    for label, mode in MODES:
        ranks = [_rank(found[q.name()][mode], q.answer) for q in qs]
        n = len(ranks)
        r1 = sum(1 for r in ranks if r == 1) / n
        r5 = sum(1 for r in ranks if r and r <= 5) / n
        mrr = sum(1 / r for r in ranks if r) / n
        out.append(f"{label}: recall@1 {r1:.3f}  recall@5 {r5:.3f}  MRR {mrr:.3f}")
    out += ["", "rank of the answer (off / ltr; - = not in the top 20):"]
    for q in qs:
        cells = [str(_rank(found[q.name()][mode], q.answer) or "-") for _label, mode in MODES]
        out.append(f"  {' / '.join(cells):>7}  {q.name()}  -> {q.answer}")
    return "\n".join(out) + "\n"


def _rank(paths: list[str], answer: str) -> int | None:
    return paths.index(answer) + 1 if answer in paths else None


@dataclass
class Run:
    texts: dict[str, str]  # slug -> golden text
    found: dict[str, dict[str, list[str]]]  # slug -> mode -> ranked paths


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    """Index each fixture once, then ask every question with the rerankers off and on (same index)."""
    out: dict[str, Run] = {}
    for fixture, qs in QUESTIONS.items():
        base = tmp_path_factory.mktemp(fixture)
        ws = BUILD[fixture](base / "ws")
        answers: dict[str, dict[str, dict]] = {q.name(): {} for q in qs}
        for _label, mode in MODES:
            eng = Engine(ws, index_dir=str(base / "index"), vectors=False, reranker=mode)
            try:
                if mode == MODES[0][1]:
                    eng.index()
                for q in qs:
                    answers[q.name()][mode] = dict(eng.context(q.query, anchors=list(q.anchors),
                                                               kinds=list(q.kinds) or None))
            finally:
                eng.close()
        out[fixture] = Run(
            texts={q.name(): render(q, answers[q.name()]) for q in qs},
            found={q.name(): {m: [r["path"] for r in a["results"]] for m, a in answers[q.name()].items()}
                   for q in qs})
    return out


def _check(path: Path, got: str, update: bool) -> None:
    if update:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(got, encoding="utf-8")
        return
    assert path.is_file(), f"{path} is missing: run pytest {__file__} --update-goldens and review the diff"
    want = path.read_text(encoding="utf-8")
    if want != got:
        diff = "".join(difflib.unified_diff(want.splitlines(keepends=True), got.splitlines(keepends=True),
                                            fromfile=f"{path} (golden)", tofile="now"))
        pytest.fail(f"ranking changed (-golden +now); if meant, rerun with --update-goldens and review:\n{diff}",
                    pytrace=False)


CASES = [(fixture, q) for fixture, qs in QUESTIONS.items() for q in qs]


def test_questions_have_distinct_slugs() -> None:
    names = [(f, q.name()) for f, q in CASES]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("fixture,q", CASES, ids=[f"{f}/{q.name()}" for f, q in CASES])
def test_ranking_matches_golden(runs: dict[str, Run], request: pytest.FixtureRequest, fixture: str, q: Q) -> None:
    _check(GOLDEN / fixture / f"{q.name()}.txt", runs[fixture].texts[q.name()],
           request.config.getoption("--update-goldens"))


@pytest.mark.parametrize("fixture", sorted(QUESTIONS))
def test_rank_stats_match_golden(runs: dict[str, Run], request: pytest.FixtureRequest, fixture: str) -> None:
    _check(GOLDEN / fixture / "rank-stats.txt", stats(fixture, runs[fixture].found),
           request.config.getoption("--update-goldens"))


def test_no_stale_golden_files() -> None:
    """A golden file whose question was removed would otherwise never be read again."""
    for fixture, qs in QUESTIONS.items():
        want = {f"{q.name()}.txt" for q in qs} | {"rank-stats.txt"}
        have = {p.name for p in (GOLDEN / fixture).glob("*.txt")} if (GOLDEN / fixture).is_dir() else set()
        assert have <= want, f"stale golden files in {GOLDEN / fixture}: {sorted(have - want)}"
