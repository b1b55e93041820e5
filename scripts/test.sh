#!/usr/bin/env bash
# Install Delphi with its test extras into .venv and run every test.
# Exit 5 from pytest (no tests collected) fails the run: a suite that runs nothing must not pass.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if ! command -v rg >/dev/null 2>&1; then
  # ripgrep is the grep baseline of the retrieval benchmark (its smoke test runs here).
  if command -v apt-get >/dev/null 2>&1; then
    (apt-get install -y -q ripgrep >/dev/null 2>&1 || (apt-get update -q >/dev/null && apt-get install -y -q ripgrep >/dev/null))
  fi
fi
[ -d .venv ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e ".[test]"
.venv/bin/ruff check delphi_ls bench tests
set +e
.venv/bin/python -m pytest -q -p no:cacheprovider "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no tests: failing" >&2
  exit 1
fi
exit "$rc"
