"""Corpora that keep their history: each sample's repository checked out at its base commit, with `.git`.

    python -m bench.git_corpora --samples ../shared/bench/dev_mined.jsonl --mirrors /work/.mirror --out CORPORA_GIT

`materialize.sh` writes plain trees, so the co-change branch has no history to read there. These are
`git clone --shared` copies of the fetched mirrors (objects are borrowed, not copied) checked out at
each sample's base commit: `git log` sees exactly the history before the change, never the change.
Same folder names as the plain corpora, so `bench.arb --corpora CORPORA_GIT` just works.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from delphi_ls.evaluation.scoring import corpus_dir


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--samples", required=True)
    ap.add_argument("--mirrors", required=True, help="folder of OWNER+NAME/repo mirrors, as `fetch` lays them out")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    missing: set[str] = set()
    for line in open(args.samples):
        if not line.strip():
            continue
        s = json.loads(line)
        dest = corpus_dir(out, s)
        if dest.exists():
            continue
        mirror = Path(args.mirrors) / s["repo"].replace("/", "+") / "repo"
        if not mirror.exists():
            missing.add(s["repo"])
            continue
        subprocess.run(["git", "clone", "-q", "--shared", "--no-checkout", str(mirror), str(dest)], check=True)
        subprocess.run(["git", "-C", str(dest), "checkout", "-q", "--detach", s["base_commit"]], check=True)
    for repo in sorted(missing):
        print(f"missing mirror: {repo}", file=sys.stderr)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
