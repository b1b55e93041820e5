#!/usr/bin/env bash
# Install Delphi into .venv and answer a question about a folder (default: this repository).
#   bash scripts/try.sh [FOLDER] [QUESTION]
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -d .venv ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e .
FOLDER=${1:-.}
QUESTION=${2:-"where are files skipped because they are binary or too large?"}
.venv/bin/delphi index "$FOLDER"
.venv/bin/delphi context "$FOLDER" "$QUESTION"
