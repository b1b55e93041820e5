from pathlib import Path

import pytest

from delphi_ls.settings import Settings, SettingsError


def test_defaults_and_sources(tmp_path: Path):
    (tmp_path / "delphi.toml").write_text('chunk_chars = 900\nembedder = "minilm-l6-int8"\n')
    s = Settings.load(tmp_path, overrides={"rrfK": 30}, env={"DELPHI_MAX_FILE_BYTES": "5000"})
    assert (s.chunk_chars, s.embedder, s.rrf_k, s.max_file_bytes) == (900, "minilm-l6-int8", 30, 5000)


def test_pyproject_tool_table(tmp_path: Path):
    (tmp_path / "pyproject.toml").write_text('[tool.delphi]\nvectors = false\n')
    assert Settings.load(tmp_path, env={}).vectors is False


@pytest.mark.parametrize("raw,key", [
    ({"embedder": "gpt-9"}, "embedder"),
    ({"chunkChars": "lots"}, "chunkChars"),
    ({"max_file_bytes": -1}, "max_file_bytes"),
    ({"no_such_thing": 1}, "no_such_thing"),
    ({"branch_weights": {"bogus": 1.0}}, "branch_weights"),
    ({"reranker_weight": 3}, "reranker_weight"),
    ({"chroma_url": "not a url"}, "chroma_url"),
    ({"vectors": "maybe"}, "vectors"),
    # nan passed `w < 0`; inf and true passed too: the ranking was scrambled and the language server sent
    # `"score": NaN`, which is no JSON (a newcomer, session 29)
    ({"branch_weights": {"bm25": float("nan")}}, "branch_weights"),
    ({"branch_weights": {"bm25": float("inf")}}, "branch_weights"),
    ({"branch_weights": {"bm25": True}}, "branch_weights"),
    ({"branch_weights": "bm25=nan"}, "branch_weights"),
])
def test_bad_values_name_the_key(raw, key):
    with pytest.raises(SettingsError) as e:
        Settings.from_dict(raw)
    assert e.value.key == key and key in str(e.value)


def test_bad_toml_is_a_clear_error(tmp_path: Path):
    (tmp_path / "delphi.toml").write_text("chunk_chars = = 3\n")
    with pytest.raises(SettingsError, match="not valid TOML"):
        Settings.load(tmp_path, env={})


def test_index_lives_outside_the_workspace_by_default(tmp_path: Path):
    p = Settings().index_path(tmp_path)
    assert tmp_path not in p.parents


def test_vscode_settings_map_one_to_one():
    import json
    import re
    from dataclasses import fields

    pkg = json.loads((Path(__file__).parents[1] / "vscode-client" / "package.json").read_text())
    contributed = {k.removeprefix("delphi.") for k in pkg["contributes"]["configuration"]["properties"]}
    camel = {re.sub(r"_([a-z])", lambda m: m.group(1).upper(), f.name) for f in fields(Settings)}
    # server.* start the server; agentTools/mcpServer switch the extension's own agent tools and MCP provider.
    own = ("server.", "agentTools.", "mcpServer.")
    assert {k for k in contributed if not k.startswith(own)} == camel
    server_defaults = Settings().as_dict()
    for key in camel:  # and every contributed default is the server's own (the settings UI shows it)
        default = pkg["contributes"]["configuration"]["properties"][f"delphi.{key}"]["default"]
        Settings.from_dict({key: default})
        snake = re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), key)
        assert default == server_defaults[snake], f"delphi.{key}: the extension says {default!r}, the server {server_defaults[snake]!r}"


def test_a_settings_file_that_is_not_utf8_is_a_clear_error(tmp_path: Path):
    """A Latin-1 comment was a UnicodeDecodeError traceback from every front (a newcomer, session 29)."""
    (tmp_path / "delphi.toml").write_bytes(b"chunk_chars = 1000 # M\xfcller\n")
    with pytest.raises(SettingsError, match="not valid TOML: not UTF-8 at byte 22"):
        Settings.load(tmp_path, env={})


@pytest.mark.parametrize("text,said", [
    (b"\xff\xfe", "not valid TOML: not UTF-8 at byte 0; its [tool.delphi] is not read"),
    (b'tool = "x"\n', "[tool] is not a table; not read"),
    (b'[tool]\ndelphi = 3\n', "[tool.delphi] is not a table; not read"),
    (b"[project\n", "not valid TOML"),
    (b"x = " + b"[" * 5000 + b"]" * 5000 + b"\n", "nested too deeply"),
])
def test_a_broken_pyproject_is_a_warning_not_a_lock_out(tmp_path: Path, text: bytes, said: str):
    """The project's pyproject.toml is mostly other tools': one that does not parse stopped every command (a
    cloned repository locking its user out). Its [tool.delphi] is not read, and health says why."""
    (tmp_path / "pyproject.toml").write_bytes(text)
    s = Settings.load(tmp_path, env={})
    assert s.chunk_chars == Settings().chunk_chars
    assert len(s.unknown) == 1 and said in s.unknown[0], s.unknown


def test_a_misspelt_environment_variable_is_a_warning(tmp_path: Path):
    """`DELPHI_RFF_K=3` was ignored without a word (a newcomer, session 29); a variable no setting resembles is
    nobody's business of Delphi's."""
    (tmp_path / "empty.toml").write_text("")
    s = Settings.load(tmp_path, env={"DELPHI_RFF_K": "3", "DELPHI_WS": "x",
                                     "DELPHI_CONFIG": str(tmp_path / "empty.toml")})
    assert s.rrf_k == Settings().rrf_k
    assert s.own == ["the environment variable DELPHI_RFF_K is not a setting (did you mean DELPHI_RRF_K?); "
                     "ignored"] and s.unknown == []


def test_a_user_config_variable_naming_no_file_is_a_warning(tmp_path: Path):
    """`DELPHI_CONFIG=~/.config/delphi/conifg.toml` read no settings and said nothing (noticed session 29)."""
    (tmp_path / "real.toml").write_text("rrf_k = 7\n")
    s = Settings.load(tmp_path, env={"DELPHI_CONFIG": str(tmp_path / "rael.toml")})
    assert s.rrf_k == Settings().rrf_k
    assert s.own == [f"DELPHI_CONFIG names {tmp_path / 'rael.toml'}, which is not a file; no user settings read"]
    s = Settings.load(tmp_path, env={"DELPHI_CONFIG": str(tmp_path / "real.toml")})
    assert (s.rrf_k, s.own) == (7, [])
    assert Settings.load(tmp_path, env={"DELPHI_CONFIG": ""}).own == []  # set empty: the default place


def test_a_home_folder_that_cannot_be_entered_is_a_warning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """`docker run -u 1000` on an image whose HOME is /root: the user config's folder cannot be entered, and every
    command was a PermissionError traceback, `--index-dir` given or not (a newcomer, session 30)."""
    import os

    if os.getuid() == 0:  # root enters every folder: the refusal the kernel gives any other user, as it gives it
        real = Path.is_file

        def is_file(self: Path) -> bool:
            if ".config" in self.parts:
                raise PermissionError(13, "Permission denied", str(self))
            return real(self)
        monkeypatch.setattr(Path, "is_file", is_file)
    home = tmp_path / "home"
    (home / ".config" / "delphi").mkdir(parents=True)
    (home / ".config").chmod(0o000)
    try:
        s = Settings.load(tmp_path, env={"DELPHI_CONFIG": str(home / ".config" / "delphi" / "config.toml")})
        assert len(s.own) == 1 and "cannot be entered (permission denied)" in s.own[0], s.own
    finally:
        (home / ".config").chmod(0o755)


@pytest.mark.parametrize("repo_key,user_key,override_key", [
    ("reranker_window", "rerankerWindow", "rerankerWindow"),
    ("rerankerWindow", "reranker_window", "reranker_window"),
    ("reranker-window", "rerankerWindow", "reranker_window"),
])
def test_a_later_source_wins_however_each_spells_the_key(tmp_path: Path, repo_key: str, user_key: str,
                                                         override_key: str):
    """Sources were merged by the key as spelt: a user file's `rerankerWindow` sat beside the environment's
    `reranker_window`, was applied after it and won, over `Engine(reranker_window=…)` and the editor's camelCase
    settings too (a newcomer, session 37)."""
    (tmp_path / "delphi.toml").write_text(f"{repo_key} = 11\n")
    (tmp_path / "user.toml").write_text(f"{user_key} = 22\n")
    env = {"DELPHI_CONFIG": str(tmp_path / "user.toml")}
    assert Settings.load(tmp_path, env=env).reranker_window == 22
    env["DELPHI_RERANKER_WINDOW"] = "33"
    assert Settings.load(tmp_path, env=env).reranker_window == 33
    assert Settings.load(tmp_path, env=env, overrides={override_key: 44}).reranker_window == 44


def test_an_override_replaces_a_bad_value_spelt_otherwise(tmp_path: Path):
    """The editor's `rrfK` set, a bad `DELPHI_RRF_K` in the environment still refused the workspace, and the error
    named no source."""
    env = {"DELPHI_RRF_K": "abc"}
    with pytest.raises(SettingsError) as e:
        Settings.load(tmp_path, env=env)
    assert "DELPHI_RRF_K" in str(e.value)
    assert Settings.load(tmp_path, env=env, overrides={"rrfK": 10}).rrf_k == 10
