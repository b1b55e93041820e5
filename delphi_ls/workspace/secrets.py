"""Secrets inside ordinary files, redacted before any store or answer sees the text.

A file that holds credentials by its name (`.env`, `*.pem`, `id_rsa`) is never indexed (``scan.is_secret_file``).
A key pasted into a tracked source file is not caught by its name: `delphi context "where are the AWS
credentials configured"` returned `config.py` with the key in its snippet, and an agent would paste it into a
prompt that leaves the machine (a newcomer's test, session 27). Such text is replaced where a file's bytes
become text, for indexing (``indexing.workers.prepare_file``, editor buffers included) and for answers
(``retrieval.packing.file_lines``), so no store, snippet or packed span holds it.

Only formats that identify themselves are matched: a PEM private-key block (also base64-encoded whole), a
provider's prefix and length (AWS, GitHub, GitLab, Slack, Stripe, Google, OpenAI/Anthropic, npm, PyPI, Hugging
Face, SendGrid, Mailgun, Shopify, DigitalOcean, Vault, Databricks, Square, age, Discord and Telegram), a JWT,
the password of a URL (`postgres://user:PASSWORD@host`) or of a connection string (`;Password=…`,
`&password=…`), HTTP basic credentials, the value given to the usual names of an AWS secret key or session
token, of an Azure account key and of a registry's auth token. These are the
high-confidence rules of secret scanners (gitleaks, detect-secrets); a generic "high-entropy string" rule
is not used, since it also fires on hashes, test vectors and base64 data that code search must find. Each
rule's pattern starts with a literal, so a file without one costs a fast substring search per rule (about
6 ms per MB of text for all of them, on the dev_mined corpora).

A redaction keeps the line count (a private key's body lines become empty), so line numbers, chunk
boundaries and spans stay where they are in the file.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable
from dataclasses import dataclass

# A change to what the rules replace bumps indexing.pipeline.PARSER_VERSION: every index re-chunks its files once.


@dataclass(frozen=True)
class _Rule:
    kind: str  # said in the mark and in health
    # Every pattern starts with a literal, which the regex engine finds by a fast substring search: a leading
    # `\b` or lookbehind took that away (an `aws_secret` rule with `(?i)` cost 7.9 ms per MB of text, a literal
    # start 0.4; measured on the dev_mined corpora). The character before a match is checked in Python.
    pattern: re.Pattern[str]
    group: int = 0  # the group replaced (0: the whole match)
    check: Callable[[str], bool] | None = None  # a further test of the replaced text
    after_word: bool = False  # may follow a letter or digit (the literal is the end of a name, not a start)
    # What the text just before the match must end with (searched in its last 40 characters): a literal start
    # the rule cannot take into its pattern (a Telegram bot's id, the separator before `password=`).
    before: re.Pattern[str] | None = None

    @property
    def literal(self) -> str:
        """The pattern's literal start: a file without it is not searched (``in`` is a fast substring search;
        the regex engine's own took about 0.7 ms per MB of text per rule, with 33 rules half the cost of
        indexing's redaction; session 40)."""
        return _literal_start(self.pattern.pattern)


def _literal_start(pattern: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern) and not pattern[i + 1].isalnum():
            c, step = pattern[i + 1], 2  # an escaped punctuation mark is itself
        elif c in "[](){}.*+?|^$\\":
            break
        else:
            step = 1
        if pattern[i + step: i + step + 1] in ("?", "*", "{"):
            break  # optional or repeated: not part of every match
        out.append(c)
        i += step
    return "".join(out)


def _has_digit_and_letter(s: str) -> bool:
    # `sk-` also starts CSS classes and slugs (`sk-learn-extensions-for-tables`); a key has digits and letters.
    return any(c.isdigit() for c in s) and any(c.isalpha() for c in s) and "--" not in s


def _mixed(s: str) -> bool:
    return any(c.isupper() for c in s) and any(c.islower() for c in s) and any(c.isdigit() for c in s)


def _base64_private_key(s: str) -> bool:
    """A base64 text that decodes to a PEM holding a private key (a certificate alone is public; `openssl ecparam
    -genkey` writes EC PARAMETERS first, a bundle a certificate first: its whole first 8 KB are read)."""
    data = "".join(s[:12000].split())
    try:
        return b"PRIVATE KEY-----" in base64.b64decode(data[: min(len(data), 10924) // 4 * 4])
    except ValueError:
        return False


def _basic_credentials(s: str) -> bool:
    """`Authorization: Basic …`'s value: base64 of `user:password`."""
    try:
        text = base64.b64decode(s + "=" * (-len(s) % 4)).decode("ascii")
    except (ValueError, UnicodeDecodeError):
        return False
    return ":" in text and text.isprintable()


_PLACEHOLDERS = {"password", "pass", "secret", "pwd", "redacted", "changeme", "xxx", "xxxx", "none", "null"}


def _not_placeholder(s: str) -> bool:
    # `postgres://user:${DB_PASSWORD}@db`, `://user:<password>@`, `://u:****@` name a secret, they are none.
    return not (s.startswith(("$", "<", "{", "%", "*")) or s.lower() in _PLACEHOLDERS)


_PEM = re.compile(r"-----BEGIN ((?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?)-----(.*?)(?:-----END \1-----|\Z)", re.S)
_END = r"(?![A-Za-z0-9_-])"

_RULES: tuple[_Rule, ...] = (
    _Rule("AWS access key id", re.compile(r"A(?:KIA|SIA|BIA|CCA)[A-Z0-9]{16}(?![A-Z0-9])")),
    # The value given to the key's usual names (`AWS_SECRET_ACCESS_KEY = "…"`, `aws_secret_access_key: …`,
    # `secretAccessKey: '…'`): 40 characters of base64 with nothing after.
    _Rule("AWS secret access key",
          re.compile(r"ecret(?:_access_key|AccessKey)\W{0,5}?[:=]>?\W{0,3}?([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])"),
          group=1, after_word=True),
    _Rule("AWS secret access key",
          re.compile(r"ECRET_ACCESS_KEY\W{0,5}?[:=]>?\W{0,3}?([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])"), group=1,
          after_word=True),
    # s3cmd's `.s3cfg` and many INI files say `secret_key = …` (a newcomer's config leaked, session 36), MinIO and
    # other S3 clients `secretKey: "…"`: the same 40 characters of base64, with a capital, a small letter and a
    # digit (a hex digest under that name is none).
    _Rule("AWS secret access key",
          re.compile(r"ecret(?:_key|_?Key)\W{0,5}?[:=]>?\W{0,3}?([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])"), group=1,
          check=_mixed, after_word=True),
    _Rule("AWS secret access key",
          re.compile(r"ECRET_KEY\W{0,5}?[:=]>?\W{0,3}?([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])"), group=1,
          check=_mixed, after_word=True),
    _Rule("GitHub token", re.compile(r"gh[pousr]_[A-Za-z0-9]{36,255}" + _END)),
    _Rule("GitHub token", re.compile(r"github_pat_[A-Za-z0-9_]{22,255}" + _END)),
    _Rule("GitLab token", re.compile(r"glpat-[A-Za-z0-9_-]{20,}")),
    _Rule("Slack token", re.compile(r"xox[abposr]-[A-Za-z0-9-]{10,}")),
    _Rule("Slack webhook", re.compile(r"hooks\.slack\.com/(?:services|workflows)/[A-Za-z0-9+/_-]{20,}"), after_word=True),
    # `sk_live_…`, `rk_test_…` (a publishable `pk_` key is meant to be public).
    _Rule("Stripe secret key", re.compile(r"sk_(?:live|test)_[A-Za-z0-9]{16,}" + _END)),
    _Rule("Stripe secret key", re.compile(r"rk_(?:live|test)_[A-Za-z0-9]{16,}" + _END)),
    _Rule("Google API key", re.compile(r"AIza[A-Za-z0-9_-]{35}" + _END)),
    _Rule("API key (sk-)", re.compile(r"sk-(?:ant-|proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}"),
          check=_has_digit_and_letter),
    _Rule("npm token", re.compile(r"npm_[A-Za-z0-9]{36}" + _END)),
    _Rule("PyPI token", re.compile(r"pypi-AgE[A-Za-z0-9_-]{50,}")),
    _Rule("Hugging Face token", re.compile(r"hf_[A-Za-z0-9]{34,}" + _END), check=_has_digit_and_letter),
    _Rule("JSON web token", re.compile(r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}")),
    # `postgres://user:PASSWORD@host`: the password only; Redis's `redis://:PASSWORD@host` has no user (a
    # newcomer, session 40).
    _Rule("password in a URL", re.compile(r"://[^\s:/@'\"`]{0,100}:([^\s/@'\"`]{1,200})@"), group=1,
          check=_not_placeholder, after_word=True),
    # Below: the self-identifying formats a newcomer's test found kept (session 40), as gitleaks' rules write them.
    # A PEM private key base64-encoded whole (Kubernetes' `tls.key:`, a kubeconfig's `client-key-data:`):
    # `LS0tLS1CRUdJTi` is `-----BEGIN`.
    # Wrapped (`base64`'s 76 columns) its following lines of base64 go with it, as a PEM body's do.
    _Rule("private key", re.compile(r"LS0tLS1CRUdJTi[A-Za-z0-9+/]{20,}={0,2}(?:\r?\n[ \t]*[A-Za-z0-9+/]{16,}={0,2})*"),
          check=_base64_private_key, after_word=True),
    # Providers' prefixed tokens, one literal-led pattern each: a pattern without a literal start (all of them as
    # one alternation) cost 10 ms per MB of text, ten literal-led ones about 0.5 each (this machine, session 40).
    _Rule("SendGrid key", re.compile(r"SG\.[A-Za-z0-9_-]{16,32}\.[A-Za-z0-9_-]{30,64}" + _END),
          check=_has_digit_and_letter),
    _Rule("Mailgun key", re.compile(r"key-[0-9a-f]{32}" + _END), check=_has_digit_and_letter),
    _Rule("Shopify token", re.compile(r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}" + _END)),
    _Rule("DigitalOcean token", re.compile(r"dop_v1_[a-f0-9]{64}" + _END)),
    _Rule("Vault token", re.compile(r"hvs\.[A-Za-z0-9_-]{24,}"), check=_has_digit_and_letter),
    _Rule("Databricks token", re.compile(r"dapi[a-f0-9]{32}(?:-[0-9])?" + _END), check=_has_digit_and_letter),
    _Rule("Square token", re.compile(r"sq0(?:csp|atp)-[A-Za-z0-9_-]{22,43}" + _END)),
    _Rule("age secret key", re.compile(r"AGE-SECRET-KEY-1[0-9A-Z]{58}")),
    _Rule("GitLab token", re.compile(r"glrt-[A-Za-z0-9_-]{20,}")),  # a runner's
    _Rule("Discord webhook", re.compile(r"discord(?:app)?\.com/api/webhooks/[0-9]+/([A-Za-z0-9_-]{60,})"), group=1,
          after_word=True),
    # `123456789:AA…`: the bot's id and `AA` stay, the rest goes.
    _Rule("Telegram bot token", re.compile(r":AA([A-Za-z0-9_-]{33})" + _END), group=1, after_word=True,
          before=re.compile(r"(?<![0-9])[0-9]{8,10}\Z")),
    # Azure storage and service bus connection strings (`AccountKey=…`, `SharedAccessKey=…`).
    _Rule("Azure key", re.compile(r"Key=([A-Za-z0-9+/]{40,}={0,2})"), group=1, after_word=True,
          before=re.compile(r"(?:Account|SharedAccess)\Z")),
    # A connection string's or a URL query's password (`;Password=…;`, `?user=app&password=…`), or one at a line's
    # start (`password=…` in a properties file); not a call's keyword (`connect(host, password=pw)`, indented
    # on its own line too). ODBC's `PWD=` is
    # left: it is a shell's variable too (`PWD=/` in black's changelog).
    _Rule("password in a connection string", re.compile(r"assword=([^\s;&'\"]{1,200})"), group=1,
          check=_not_placeholder, after_word=True, before=re.compile(r"(?:\A|\n|[?&;'\"] ?)[Pp]\Z")),
    _Rule("HTTP basic credentials", re.compile(r"Basic ([A-Za-z0-9+/]{12,}={0,2})(?![A-Za-z0-9+/=])"), group=1,
          check=_basic_credentials),
    # An AWS session token (`aws_session_token = …`, `AWS_SESSION_TOKEN=…`): long base64.
    _Rule("AWS session token", re.compile(r"ession_token\W{0,5}?[:=]>?\W{0,3}?([A-Za-z0-9/+=]{100,})"), group=1,
          after_word=True),
    _Rule("AWS session token", re.compile(r"ESSION_TOKEN\W{0,5}?[:=]>?\W{0,3}?([A-Za-z0-9/+=]{100,})"), group=1,
          after_word=True),
    # npm's and yarn's registry tokens under their names (`_authToken=…`, `npmAuthToken: "…"`), the old UUID
    # form included; only under those names: `authToken: OAuth2AccessTokenResponse` is a type (a review).
    _Rule("registry auth token", re.compile(r"uthToken\W{0,5}?[:=]\W{0,3}?([A-Za-z0-9_+/=-]{16,})(?![\w.(])"), group=1,
          check=lambda s: _has_digit_and_letter(s) and _not_placeholder(s), after_word=True,
          before=re.compile(r"(?:_a|npmA)\Z")),
)


_LITERALS = tuple((rule, rule.literal) for rule in _RULES)

_KEY_TOKEN = re.compile(r"[A-Za-z0-9+/=]+")
_ESCAPES = re.compile(r"\\[nr]")


def _looks_like_key(body: str) -> bool:
    """A PEM body is base64 in long lines (64 characters), maybe inside string literals with `\\n` escapes and
    after `Proc-Type:` headers. Code that names both markers (a parser, a test of one) has the code between
    them: short words, dots and brackets; it is not redacted."""
    words = [w.strip("\"',+;") for w in _ESCAPES.sub(" ", body).split()]
    words = [w for w in words if w and ":" not in w]
    keyish = [w for w in words if _KEY_TOKEN.fullmatch(w)]
    total = sum(len(w) for w in keyish)
    return total >= 40 and len(keyish) >= 0.8 * len(words) and total / len(words) >= 20


def _mark(kind: str) -> str:
    return f"[redacted {kind}]"


def redact(text: str) -> tuple[str, dict[str, int]]:
    """``text`` with every secret the rules know replaced by a mark naming its kind, and how many of each kind.
    The line count never changes."""
    found: dict[str, int] = {}
    if "PRIVATE KEY" in text:
        def pem(m: re.Match[str]) -> str:
            body = m.group(2)
            if not _looks_like_key(body):
                return m.group(0)
            found["private key"] = found.get("private key", 0) + 1
            end = f"-----END {m.group(1)}-----" if m.group(0).endswith("-----END " + m.group(1) + "-----") else ""
            # The body's real line breaks stay (line numbers), its `\n` escapes in a one-line string go with the key.
            return f"-----BEGIN {m.group(1)}-----{_mark('private key')}" + "\n" * body.count("\n") + end

        text = _PEM.sub(pem, text)
    for rule, literal in _LITERALS:
        if literal not in text:
            continue

        def sub(m: re.Match[str], rule: _Rule = rule) -> str:
            at = m.start()
            if not rule.after_word and at and (m.string[at - 1].isalnum() or m.string[at - 1] == "_"):
                return m.group(0)  # inside a longer name (`task-…`, `my_ghp_…`)
            if rule.before is not None and not rule.before.search(m.string, max(0, at - 40), at):
                return m.group(0)
            secret = m.group(rule.group)
            if rule.check is not None and not rule.check(secret):
                return m.group(0)
            kind = rule.kind
            found[kind] = found.get(kind, 0) + 1
            start, end = m.start(rule.group) - at, m.end(rule.group) - at
            whole = m.group(0)
            return whole[:start] + _mark(kind) + "\n" * secret.count("\n") + whole[end:]  # lines keep their numbers

        text = rule.pattern.sub(sub, text)
    if "AWS access key id" in found:
        text = _beside_key_ids(text, found)
    return text, found


# An AWS secret key written bare (a README's code block: the key id on one line, the secret on the next) has no
# name to find it by; beside a key id, within NEAR_KEY_LINES lines, a 40-character base64 word with a capital,
# a small letter and a digit is taken for one (a newcomer's notes leaked one, session 36). Anywhere else such a
# word is left alone: base64 data and hashes are what code search must find.
NEAR_KEY_LINES = 3
_BARE_SECRET = re.compile(r"(?<![A-Za-z0-9/+])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])")  # `AWS_SECRET=…` too


def _beside_key_ids(text: str, found: dict[str, int]) -> str:
    lines = text.split("\n")
    near = {j for i, line in enumerate(lines) if _mark("AWS access key id") in line
            for j in range(max(0, i - NEAR_KEY_LINES), min(len(lines), i + NEAR_KEY_LINES + 1))}
    for j in sorted(near):
        def sub(m: re.Match[str]) -> str:
            if not _mixed(m.group(0)):
                return m.group(0)
            found["AWS secret access key"] = found.get("AWS secret access key", 0) + 1
            return _mark("AWS secret access key")
        lines[j] = _BARE_SECRET.sub(sub, lines[j])
    return "\n".join(lines)


def in_words(found: dict[str, int]) -> str:
    """``{"AWS access key id": 2}`` → ``"AWS access key id ×2"``: the note a file's manifest row keeps."""
    return ", ".join(f"{k} ×{n}" if n > 1 else k for k, n in sorted(found.items()))
