#!/usr/bin/env bash
# Install Delphi with its test extras into .venv and run every test.
# Exit 5 from pytest (no tests collected) fails the run: a suite that runs nothing must not pass.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
# Debian packages the suite needs: ripgrep (the benchmark's grep baseline) and neovim
# (a real editor client of the language server). Installed when missing and apt is there.
need=()
command -v rg >/dev/null 2>&1 || need+=(ripgrep)
command -v nvim >/dev/null 2>&1 || need+=(neovim)
if [ ${#need[@]} -gt 0 ] && command -v apt-get >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get install -y -q "${need[@]}" >/dev/null 2>&1 || ($SUDO apt-get update -q >/dev/null && $SUDO apt-get install -y -q "${need[@]}" >/dev/null)
fi
[ -d .venv ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e ".[test]"
.venv/bin/ruff check delphi_ls bench tests
set +e
.venv/bin/python -m pytest -q -p no:cacheprovider "$@"
rc=$?
set -e
# The VS Code extension: type-check, unit tests under plain Node, and an integration test
# against the real delphi-ls of this checkout.
if [ "$rc" -eq 0 ] || [ "$rc" -eq 5 ]; then
  (cd vscode-client && npm ci --no-audit --no-fund --loglevel=error && DELPHI_PYTHON="$PWD/../.venv/bin/python" npm test) || rc=$?
fi
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no tests: failing" >&2
  exit 1
fi
exit "$rc"
