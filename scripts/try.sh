#!/usr/bin/env bash
# Install Delphi into this checkout's .venv and answer a question about a folder.
#   bash scripts/try.sh [FOLDER] [QUESTION]
# FOLDER is read from where you run the command (default: this checkout, Delphi itself).
set -euo pipefail
HERE=$(pwd)
CHECKOUT=$(cd "$(dirname "$0")/.." && pwd)
FOLDER=${1:-$CHECKOUT}
QUESTION=${2:-"where are files skipped because they are binary or too large?"}
# Resolve FOLDER before anything changes folder, so `try.sh ../myrepo` means what it says.
case "$FOLDER" in
  /*) ;;
  *) FOLDER="$HERE/$FOLDER" ;;
esac
if [ ! -d "$FOLDER" ]; then
  echo "try.sh: no such folder: $FOLDER" >&2
  exit 2
fi
FOLDER=$(cd "$FOLDER" && pwd)

cd "$CHECKOUT"
PY=${PYTHON:-python3}
[ -d .venv ] || "$PY" -m venv .venv
# Install once (again only when pyproject.toml changed; the checkout is installed editable, so code
# changes need no reinstall). pip's and the build backend's chatter goes to a log, shown if it fails.
if [ ! -x .venv/bin/delphi ] || [ pyproject.toml -nt .venv/bin/delphi ]; then
  LOG=.venv/try-install.log
  echo "installing Delphi into $CHECKOUT/.venv (log: $LOG)" >&2
  if ! { .venv/bin/python -m pip install -q --upgrade pip && .venv/bin/python -m pip install -q -e .; } >"$LOG" 2>&1; then
    cat "$LOG" >&2
    echo "try.sh: installing Delphi failed (log above, kept in $LOG)" >&2
    exit 1
  fi
  touch .venv/bin/delphi
fi
.venv/bin/delphi index "$FOLDER"
.venv/bin/delphi context "$FOLDER" "$QUESTION"
