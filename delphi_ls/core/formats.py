"""What an index's format depends on, in a module of constants: ``delphi --version`` prints them without
loading the engine, so two installs of the same release number that would write different indexes tell apart.
"""

INDEX_FORMAT = 3  # the stores' layout (engine.py refuses and rebuilds another)
# Bumped when chunking, symbols, import extraction or a file's kind change what they produce for the same bytes.
# 2: package.json entry points and names (JS/TS packages imported by folder or by name).
# 3: test support folders (`test-helpers/`, `testutil/`, `test-support/`) are kind "test".
# 4: secrets inside files redacted (workspace/secrets.py): an older index's chunks may hold them.
# 5: a line longer than two windows is cut into pieces (its tail was dropped).
# 6: lines end at "\n" only, a lone "\r" is a line end, UTF-16/32 files are text, no byte-order mark in chunks
#    (core/text.py); words with letters beyond ASCII are whole tokens (core/tokens.py).
# 7: `secret_key = …` and a bare AWS secret key beside its key id are redacted (workspace/secrets.py); a word
#    longer than 64 characters made of words gives its parts as tokens (core/tokens.py).
# 8: a definition's doc comment, decorators and attributes are in its chunk, a comment ending a line of code in
#    that line's (indexing/chunker.py); JavaScript definitions by assignment (`exports.x = function…`) and
#    class fields holding functions are symbols; `Latest.java` and a C# `*Spec.cs` outside a test folder are code;
#    Go's structs, interfaces, package-level vars and consts are symbols of their kinds; a Cargo.toml names its crate.
# 9: more secrets redacted: a base64-encoded private key, a URL's password with no user, connection strings'
#    passwords, HTTP basic credentials, AWS session tokens, registry auth tokens, ten providers' prefixed tokens.
# 10: a Jupyter notebook is read as its cells' code and prose, line for line (core/notebooks.py), and is code; a run
#     of Han, kana or Hangul is a word apart from Latin letters beside it, with its character pairs as tokens, and
#     file names in other scripts keep their letters when tests are named after them (core/tokens.py); Terraform,
#     HCL, `Dockerfile.*`, Jenkinsfiles and `go.mod` are config (workspace/kinds.py).
# 11: a CSV, TSV or JSON-lines file over 64 KB is indexed as its head: its first 50 lines (workspace/indexed_text.py).
# 12: Tcl and Bats files in test folders are tests (workspace/kinds.py): redis's `tests/unit/*.tcl` were "other".
# 13: a large statement that is no definition is chunked by its parts (indexing/chunker.py `_members_of`): koa's
#     `module.exports = {…}` and a top-level `describe(…, () => {…})` were cut in 60-line windows across methods.
PARSER_VERSION = 13


def describe() -> str:
    """What ``--version`` adds to the release number: an upgrade that re-parses or rebuilds an index shows here."""
    return f"index format {INDEX_FORMAT}, chunker {PARSER_VERSION}"
