"""Secrets inside ordinary files (workspace/secrets.py): replaced before any store or answer holds them.

A newcomer's workspace had an AWS key in `app/config.py`; `delphi context "where are the AWS credentials
configured"` returned it in the snippet and the packed context (session 27). These tests index real files
with the real stores and look for the secret's bytes in every file of the index and in every answer."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from delphi_ls import Engine
from delphi_ls.workspace.secrets import in_words, redact

KEY_LINE = "MIIEowIBAAKCAQEAw1xq8s9F2b7nVt4kLJ0pQ3mZrT6yUe8WcXaB5dHgN1oPiS7u"
SECRETS = {
    "AWS access key id": "AKIAZ7QW4XJ2LMNB5PRT",
    "AWS secret access key": "q8Wm3Zx7Lp2Vn5Rt9Ys4Bk6Hd1Fg0Jc8Ea3Ku7Ni",
    "GitHub token": "ghp_" + "Zq8Wm3Xx7Lp2Vn5Rt9Ys4Bk6Hd1Fg0Jc8Ea3",
    "Slack token": "xoxb-2841-93021-Qz8WmLp2Vn5Rt9",
    "API key (sk-)": "sk-proj-Qz8Wm3Xx7Lp2Vn5Rt9Ys4Bk6",
    "Stripe secret key": "sk_live_" + "51Hq8Wm3Xx7Lp2Vn5Rt9Ys4B",
    "Google API key": "AIza" + "SyQz8Wm3Xx7Lp2Vn5Rt9Ys4Bk6Hd1Fg0Jc8",
    "JSON web token": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTYifQ.Qz8Wm3Xx7Lp2Vn5Rt9Ys4Bk6",
    "password in a URL": "hunter2-Qz8Wm",
}


def test_each_kind_is_replaced_and_the_lines_stay():
    text = "\n".join([
        f'AWS_ACCESS_KEY_ID = "{SECRETS["AWS access key id"]}"',
        f'AWS_SECRET_ACCESS_KEY = "{SECRETS["AWS secret access key"]}"',
        f'aws:\n  secretAccessKey: {SECRETS["AWS secret access key"]}',
        f'token = "{SECRETS["GitHub token"]}"',
        f'slack = "{SECRETS["Slack token"]}"',
        f'openai = "{SECRETS["API key (sk-)"]}"',
        f'stripe = "{SECRETS["Stripe secret key"]}"',
        f'maps = "{SECRETS["Google API key"]}"',
        f'jwt = "{SECRETS["JSON web token"]}"',
        f'db = "postgres://admin:{SECRETS["password in a URL"]}@db.internal:5432/app"',
        "-----BEGIN RSA PRIVATE KEY-----", KEY_LINE, KEY_LINE, "-----END RSA PRIVATE KEY-----",
        # A one-line PEM inside a string literal (JSON service-account files, test fixtures).
        f'key = "-----BEGIN PRIVATE KEY-----\\n{KEY_LINE}\\n{KEY_LINE}\\n-----END PRIVATE KEY-----\\n"',
        "",
    ])
    out, found = redact(text)
    for secret in SECRETS.values():
        assert secret not in out
    assert KEY_LINE not in out
    assert out.count("\n") == text.count("\n")  # line numbers, chunks and spans stay where they are
    assert found == {"AWS access key id": 1, "AWS secret access key": 2, "GitHub token": 1, "Slack token": 1,
                     "API key (sk-)": 1, "Stripe secret key": 1, "Google API key": 1, "JSON web token": 1,
                     "password in a URL": 1, "private key": 2}
    assert "[redacted AWS access key id]" in out and "postgres://admin:[redacted password in a URL]@db" in out
    assert "-----BEGIN RSA PRIVATE KEY-----[redacted private key]\n\n\n-----END RSA PRIVATE KEY-----" in out
    assert in_words({"private key": 2, "GitHub token": 1}) == "GitHub token, private key ×2"


def test_an_s3cmd_config_and_a_bare_secret_beside_its_key_id_are_replaced():
    """s3cmd's `secret_key = …`, and a README's code block with the key id and, on the next line, the secret with no
    name: both were shown by `delphi context` (a newcomer, session 36)."""
    key_id, secret = SECRETS["AWS access key id"], SECRETS["AWS secret access key"]
    s3cfg = (f"[default]\nsecret_key = {secret}\nSECRET_KEY: {secret}\nbucket_location = US\n"
             f"minio = Minio(endpoint, secretKey: '{secret}')\nSecret_Key = {secret}\n")
    notes = f"Credentials for the test bucket:\n\n```\n{key_id}\n{secret}\n```\n"
    shell = f"export AWS_ACCESS_KEY_ID={key_id}\nexport AWS_SECRET={secret}\n"  # `=` before it (a review)
    for text in (s3cfg, notes, shell):
        out, found = redact(text)
        assert secret not in out and key_id not in out
        assert out.count("\n") == text.count("\n")
    assert redact(s3cfg)[1] == {"AWS secret access key": 4}
    assert redact(notes)[1] == {"AWS access key id": 1, "AWS secret access key": 1}
    # Far from any key id, a 40-character base64 word is data; a hex digest under that name is no key.
    far = f"{key_id}\n" + "\n" * 4 + f"blob = {secret}\n"
    assert secret in redact(far)[0]
    digest = 'SECRET_KEY = "d41d8cd98f00b204e9800998ecf8427e3b0c4429"\n'
    assert redact(digest) == (digest, {})


@pytest.mark.parametrize("text", [
    # Code that talks about keys is not a key.
    'if line.startswith("-----BEGIN RSA PRIVATE KEY-----"):\n    body = read_until(lines, "-----END RSA '
    'PRIVATE KEY-----")\n    return parse(body)\n',
    'AWS_SECRET_ACCESS_KEY = os.environ["AWS_SECRET_ACCESS_KEY"]\n',
    'url = "postgres://admin:${DB_PASSWORD}@db/app"\nother = "https://user:<password>@host"\n',
    'class_name = "sk-fading-circle-with-a-long-name"\n',          # no digit: a slug, not a key
    'def task_ghp_helper(): pass\nmy_ghp_' + "a" * 36 + " = 1\n",  # inside a longer name
    'sha = "d41d8cd98f00b204e9800998ecf8427e3b0c4429"\n',          # a hash is not a secret by any rule
    'url = "https://example.com/path?q=1"\nssh = "git@github.com:org/repo.git"\n',
])
def test_code_that_is_not_a_secret_is_left_alone(text: str):
    assert redact(text) == (text, {})


WORKSPACE = {
    "app/config.py": (
        '"""Where the service reads its cloud credentials."""\n\n'
        f'AWS_ACCESS_KEY_ID = "{SECRETS["AWS access key id"]}"\n'
        f'AWS_SECRET_ACCESS_KEY = "{SECRETS["AWS secret access key"]}"\n'
        f'GITHUB_TOKEN = "{SECRETS["GitHub token"]}"\n\n\n'
        "def credentials():\n    return AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY\n"),
    "deploy/deploy_key": f"-----BEGIN OPENSSH PRIVATE KEY-----\n{KEY_LINE}\n{KEY_LINE}\n"
                         "-----END OPENSSH PRIVATE KEY-----\n",
    "app/upload.py": "from app.config import credentials\n\n\ndef upload(path):\n    key, secret = credentials()\n"
                     "    return send(path, key, secret)\n",
}


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, body in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(body, encoding="utf-8")
    return root


def _leaks(blob: str) -> list[str]:
    return [s for s in [*SECRETS.values(), KEY_LINE] if s in blob]


def test_no_store_and_no_answer_holds_a_secret_in_a_file(tmp_path: Path):
    """Real stores (SQLite, the lexical store, Chroma with the embedded model): the secret's bytes are in no
    file of the index, in no answer (results, snippets, packed spans), and health names what was redacted."""
    ws = _write(tmp_path / "ws", WORKSPACE)
    with Engine(ws, index_dir=str(tmp_path / "idx"), reranker="off") as eng:
        eng.index()
        for q in ["where are the AWS credentials configured", "GITHUB_TOKEN", SECRETS["AWS access key id"],
                  "deploy private key"]:
            answer = eng.context(q, budget_tokens=4000)
            assert answer["results"], q
            assert _leaks(json.dumps(answer)) == [], q
        assert any(r["path"] == "app/config.py" for r in eng.context("AWS credentials")["results"])
        redacted = eng.health(check_staleness=False)["redactedSecrets"]
        assert redacted == {"app/config.py": "AWS access key id, AWS secret access key, GitHub token",
                            "deploy/deploy_key": "private key"}
    for secret in [*SECRETS.values(), KEY_LINE]:
        hits = [str(p) for p in (tmp_path / "idx").rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]
        assert hits == [], secret


def test_an_editor_buffer_with_a_secret_is_redacted_too(tmp_path: Path):
    """The language server indexes unsaved buffers: a key typed into one reaches no store either, and the
    packed answer (which reads the file on disk when it matches the index) shows none."""
    ws = _write(tmp_path / "ws", WORKSPACE)
    with Engine(ws, index_dir=str(tmp_path / "idx"), vectors=False, reranker="off") as eng:
        eng.index()
        typed = WORKSPACE["app/upload.py"] + f'\nSLACK = "{SECRETS["Slack token"]}"  # slack upload hook\n'
        rep = eng.index(only=["app/upload.py"], buffers={"app/upload.py": typed})
        assert rep.buffers_dropped == {}
        answer = eng.context("slack upload hook", budget_tokens=4000)
        assert answer["results"][0]["path"] == "app/upload.py"
        assert _leaks(json.dumps(answer)) == []
        assert eng.health(check_staleness=False)["redactedSecrets"]["app/upload.py"] == "Slack token"
        # Saved to disk as typed: the packed spans read the file and redact it as indexing did.
        (ws / "app/upload.py").write_text(typed, encoding="utf-8")
        eng.index()
        answer = eng.context("slack upload hook", budget_tokens=4000)
        assert answer["packed"] and _leaks(json.dumps(answer)) == []
    hits = [str(p) for p in (tmp_path / "idx").rglob("*")
            if p.is_file() and SECRETS["Slack token"].encode() in p.read_bytes()]
    assert hits == []


def test_an_index_made_before_redaction_is_chunked_again(tmp_path: Path):
    """An index written by a Delphi without redaction holds the secret in its chunks: PARSER_VERSION makes the
    next full run re-chunk every file, so the secret leaves the manifest."""
    import delphi_ls.indexing.pipeline as pipe
    import delphi_ls.workspace.indexed_text as reading

    ws = _write(tmp_path / "ws", WORKSPACE)
    real = reading.redact
    reading.redact = lambda text: (text, {})  # the old Delphi
    try:
        with Engine(ws, index_dir=str(tmp_path / "idx"), vectors=False, reranker="off") as eng:
            eng.index()
            eng.meta.set_state("parser_version", pipe.PARSER_VERSION - 1)
            assert SECRETS["GitHub token"] in "".join(c.text for c in eng.meta.chunks_of("app/config.py"))
    finally:
        reading.redact = real
    with Engine(ws, index_dir=str(tmp_path / "idx"), vectors=False, reranker="off") as eng:
        eng.index()
        assert SECRETS["GitHub token"] not in "".join(c.text for c in eng.meta.chunks_of("app/config.py"))
        assert "app/config.py" in eng.health(check_staleness=False)["redactedSecrets"]
    secret = SECRETS["GitHub token"].encode()
    assert [str(p) for p in (tmp_path / "idx").rglob("*") if p.is_file() and secret in p.read_bytes()] == []


def test_the_command_line_answers_without_the_secret_and_health_says_so(tmp_path: Path):
    """What the newcomer ran: `delphi context` (human output with packed spans, and --json), `delphi health`."""
    from tests.test_cli_newcomer import delphi

    ws = _write(tmp_path / "ws", WORKSPACE)
    opts = ["--index-dir", str(tmp_path / "i"), "--no-vectors"]
    assert delphi("index", str(ws), *opts).returncode == 0
    q = "where are the AWS credentials configured"
    for extra in ([], ["--json"]):
        out = delphi("context", str(ws), q, "--budget-tokens", "2000", *extra, *opts)
        assert out.returncode == 0 and "app/config.py" in out.stdout, out.stdout
        assert _leaks(out.stdout + out.stderr) == []
    health = delphi("health", str(ws), *opts).stdout
    assert "secrets redacted before indexing" in health, health
    assert "  app/config.py: AWS access key id, AWS secret access key, GitHub token" in health, health


def test_a_home_folder_or_the_root_is_not_a_workspace_unless_a_delphi_toml_says_so(tmp_path: Path, monkeypatch):
    from delphi_ls.workspace.roots import WorkspaceRefused, refusal

    home = tmp_path / "home" / "me"
    (home / "proj").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    assert "your home folder" in refusal(home)
    assert "holds your home folder" in refusal(home.parent)
    assert "root of the file system" in refusal(Path("/"))
    assert refusal(home / "proj") is None and refusal(tmp_path / "elsewhere") is None
    with pytest.raises(WorkspaceRefused):
        Engine(home, index_dir=str(tmp_path / "idx"), vectors=False)
    (home / "delphi.toml").write_text("")  # the user means it
    assert refusal(home) is None


def test_credentials_under_generic_names_and_shell_histories_are_secret_files():
    from delphi_ls.workspace.scan import is_secret_file

    for rel in [".bash_history", ".zsh_history", ".python_history", ".kube/config", ".docker/config.json",
                ".config/gh/hosts.yml", "me/.kube/config"]:
        assert is_secret_file(rel), rel
    for rel in ["src/config", "history.py", "docs/history.md", "app/.kube_config_example", "k8s/config"]:
        assert not is_secret_file(rel), rel


def test_a_secret_pasted_in_a_question_is_not_echoed_in_the_answer(tmp_path: Path):
    """The answer's `query.terms` and `query.identifiers` carried a GitHub token pasted in a question (a newcomer,
    session 36); an agent passes the answer on. It is left out of what is searched, its mark too."""
    ws = _write(tmp_path / "ws", WORKSPACE)
    with Engine(ws, index_dir=str(tmp_path / "idx"), vectors=False, reranker="off") as eng:
        eng.index()
        answer = eng.context(f"why does upload fail with token {SECRETS['GitHub token']} here")
    assert _leaks(json.dumps(answer)) == []
    assert "upload" in answer["query"]["terms"] and "redacted" not in answer["query"]["terms"]
    assert "cut" not in answer["query"]  # shorter once redacted, yet not cut (a review)
    assert answer["results"][0]["path"] == "app/upload.py"


B64_KEY = base64.b64encode(f"-----BEGIN RSA PRIVATE KEY-----\n{KEY_LINE}\n{KEY_LINE}\n-----END RSA PRIVATE KEY-----\n"
                           .encode()).decode()
B64_CERT = base64.b64encode(f"-----BEGIN CERTIFICATE-----\n{KEY_LINE}\n-----END CERTIFICATE-----\n".encode()).decode()
# Formats a newcomer's test found kept (session 40): each line's secret, and the kind it is redacted as.
MORE = [
    ('REDIS_URL = "redis://:Qz8WmRedis123@cache:6379/0"', "Qz8WmRedis123", "password in a URL"),
    (f"  client-key-data: {B64_KEY}", B64_KEY[:40], "private key"),
    (f"  tls.key: {B64_KEY}", B64_KEY[20:60], "private key"),
    # Wrapped at 76 columns (`base64`'s default), and an EC key after its parameters (a review).
    ("tls.key: |\n  " + "\n  ".join(B64_KEY[i:i + 76] for i in range(0, len(B64_KEY), 76)), B64_KEY[76:152],
     "private key"),
    ("key: " + base64.b64encode(f"-----BEGIN EC PARAMETERS-----\nBggqhkjOPQMBBw==\n-----END EC PARAMETERS-----\n"
                                f"-----BEGIN EC PRIVATE KEY-----\n{KEY_LINE}\n-----END EC PRIVATE KEY-----\n"
                                .encode()).decode(), KEY_LINE[:8], "private key"),
    ('url = "jdbc:postgresql://db:5432/shop?user=app&password=Qz8WmJdbc1"', "Qz8WmJdbc1",
     "password in a connection string"),
    ('"Server=db;Database=shop;User Id=sa;Password=Qz8WmMssql1;"', "Qz8WmMssql1", "password in a connection string"),
    ("password=Qz8WmProps1", "Qz8WmProps1", "password in a connection string"),
    # The rest of a password after `#`, `(` or `,` stayed visible (a review).
    ('"Server=db;Password=Qz8#Wm(9),x;"', "Wm(9),x", "password in a connection string"),
    ('"DefaultEndpointsProtocol=https;AccountName=shop;AccountKey=' + "Qz8Wm3Xx7Lp2" * 6 + '==;"',
     "Qz8Wm3Xx7Lp2" * 4, "Azure key"),
    ('headers = {"Authorization": "Basic ' + base64.b64encode(b"user:Qz8WmBasic").decode() + '"}',
     base64.b64encode(b"user:Qz8WmBasic").decode(), "HTTP basic credentials"),
    ('aws_session_token = "' + "IQoJb3JpZ2luX2Vj" * 8 + '"', "IQoJb3JpZ2luX2Vj" * 7, "AWS session token"),
    ("export AWS_SESSION_TOKEN=" + "FwoGZXIvYXdzE" * 10, "FwoGZXIvYXdzE" * 9, "AWS session token"),
    ("//registry.npmjs.org/:_authToken=0b1c2d3e-3d4e-4f50-8a6b-7c8d9e0f1a2b", "0b1c2d3e-3d4e-4f50", "registry auth token"),
    ("  npmAuthToken: qz8wmyarn0123456789abcdef", "qz8wmyarn0123456789abcdef", "registry auth token"),
    ('SENDGRID = "SG.Qz8Wm3Xx7Lp2Vn5Rt9Ys4B.Kz8Wm3Xx7Lp2Vn5Rt9Ys4Bk6Hd1Fg0Jc8Ea3Ku7Ni2Lo5Pq"', "Kz8Wm3Xx7Lp2Vn5",
     "SendGrid key"),
    ('MAILGUN = "key-0123456789abcdef0123456789abcdef"', "0123456789abcdef0123456789abcdef", "Mailgun key"),
    ('SHOPIFY = "shpat_0123456789abcdef0123456789abcdef"', "shpat_0123456789", "Shopify token"),
    ('DO = "dop_v1_' + "0123456789abcdef" * 4 + '"', "0123456789abcdef" * 4, "DigitalOcean token"),
    ('VAULT_TOKEN = "hvs.CAESIQz8Wm3Xx7Lp2Vn5Rt9Ys4Bk6Hd1Fg0"', "CAESIQz8Wm3Xx7Lp2Vn5", "Vault token"),
    ('DATABRICKS_TOKEN = "dapi0123456789abcdef0123456789abcdef"', "dapi0123456789abcdef", "Databricks token"),
    ('SQ = "sq0csp-Qz8Wm3Xx7Lp2Vn5Rt9Ys4Bk6Hd1Fg0Jc8Ea3K"', "Qz8Wm3Xx7Lp2Vn5Rt9Ys4", "Square token"),
    ("AGE-SECRET-KEY-1" + "QZ8WM3XX7LP2VN5RT9YS4BK6HD1FG0JC8EA3KU7NI2LO5PQ8WM3XX7LP2VN5RT", "QZ8WM3XX7LP2VN5RT9YS4",
     "age secret key"),
    ('RUNNER = "glrt-Qz8Wm3Xx7Lp2Vn5Rt9Ys4"', "Qz8Wm3Xx7Lp2Vn5Rt9Ys4", "GitLab token"),
    ('HOOK = "https://discord.com/api/webhooks/123456789012345678/' + "Qz8Wm3Xx7Lp2Vn5Rt9Ys4" * 3 + '"',
     "Qz8Wm3Xx7Lp2Vn5Rt9Ys4" * 3, "Discord webhook"),
    ('BOT = "1234567890:AAEQz8Wm3Xx7Lp2Vn5Rt9Ys4Bk6Hd1Fg0Jc"', "Qz8Wm3Xx7Lp2Vn5Rt9Ys4", "Telegram bot token"),
]


@pytest.mark.parametrize("line, secret, kind", MORE, ids=[k for _l, _s, k in MORE])
def test_more_self_identifying_formats_are_replaced(line: str, secret: str, kind: str):
    out, found = redact(line + "\n")
    assert secret not in out and found == {kind: 1}, out
    assert out.count("\n") == line.count("\n") + 1
    if kind == "private key" and secret == KEY_LINE[:8]:  # the base64 of it, not the text: decode to look
        assert "LS0tLS1CRUdJTi" not in out


@pytest.mark.parametrize("text", [
    "connect(host, password=pw)\nlogin(\n    password=os.environ['PW'],\n)\n",  # a call's keyword is code
    "authToken: OAuth2AccessTokenResponse\nval oauthToken: OAuth2Credentials = load()\n",  # types (review)
    "this.authToken = neo4jEnvironment.getAuthToken();\nnpmAuthToken: \"${NPM_TOKEN}\"\n",
    "Use Basic authentication for the admin endpoints\n",  # prose
    f"  tls.crt: {B64_CERT}\n",  # a certificate is public
    'url = "redis://cache:6379/0"\nconn = "Server=db;Database=shop;Password=${DB_PASSWORD};"\n',
    '"password=REDACTED", "user=myuser"\n',  # a placeholder (spring-boot's tests)
])
def test_code_like_the_new_formats_is_left_alone(text: str):
    assert redact(text) == (text, {})


@pytest.mark.parametrize("rel, secret", [
    # Indexed and answered verbatim before (a newcomer, session 40).
    ("ops/kubeconfig", True), ("kubeconfig.yaml", True), ("kubeconfig-prod", True), ("infra/terraform.tfstate", True),
    ("terraform.tfstate.backup", True), ("prod.auto.tfvars", True), ("terraform.tfvars.json", True),
    ("deploy/production.env", True), ("config/secrets.yml", True), (".streamlit/secrets.toml", True),
    ("helm/values-secrets.yaml", True), ("gcp/service-account-prod.json", True), ("local.settings.json", True),
    ("wp-config.php", True), ("rclone.conf", True), (".dockerconfigjson", True), ("pgpass.conf", True),
    # Code and templates named like them are not.
    ("pkg/kubeconfig.go", False), ("kubeconfig_test.go", False), ("kubeconfig.example", False),
    ("nosecrets.json", False), (".github/workflows/check-secrets.yml", False), ("sample.env", False),
    ("secrets.py", False), ("app/secrets_manager.go", False), ("secrets.yml.example", False),
    ("terraform.tfvars.example", False), ("templates/secret.yaml", False), ("environment.ts", False),
    ("service_account.py", False),
])
def test_credential_files_under_their_other_usual_names(rel: str, secret: bool):
    from delphi_ls.workspace.scan import is_secret_file

    assert is_secret_file(rel) is secret


def test_the_mcp_text_does_not_echo_a_password_in_the_question():
    from delphi_ls.shown import shown_question

    shown = shown_question("postgres://shop:Qz8WmPgPass@db.internal:5432/shop connection refused")
    assert "Qz8WmPgPass" not in shown and "[redacted password in a URL]" in shown
