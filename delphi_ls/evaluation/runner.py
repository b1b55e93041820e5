"""``delphi eval --history PATH``: how well Delphi answers a repository's own past changes.

Mines the last N merged changes (``history.mine``), writes each change's base tree into a
scratch folder (the repository is only read), indexes it incrementally (one index follows
the commits in order, so only changed files are re-done), asks the engine and the
baselines the same questions, and scores them the ARB way.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .baselines import Baselines, Corpus
from .history import checkout, git_dir_of, is_shallow, mine
from .scoring import KS, ask, gold_of, metrics, summarise

BASELINES = ("bm25", "grep", "heuristic")
WORK_MARK = ".delphi-eval"  # a --work folder Delphi made its own: its tree/ and index/ may be replaced


def work_folder(work: str | Path, repo: str | Path, git_dir: Path) -> Path:
    """The ``--work`` folder, checked before anything is written: its ``tree/`` is emptied for every base commit,
    so a folder inside the repository, or one holding anything Delphi did not put there, is refused (`--work`
    on the repository deleted its `tree/` folder, uncommitted files included; a newcomer, session 29)."""
    given = Path(work).expanduser()
    if given.exists() and not given.is_dir():
        raise ValueError(f"--work: {work} is not a folder")
    folder = given.resolve()
    repo_root = Path(repo).resolve()
    for top in {repo_root, git_dir.resolve().parent if git_dir.name == ".git" else repo_root}:
        if folder == top or top in folder.parents or folder in top.parents:
            raise ValueError(f"--work: {work} is inside the repository {top} (or holds it); the scratch trees and "
                             "index are written there and replaced: give a folder outside it")
    if folder.is_dir() and any(folder.iterdir()) and not (folder / WORK_MARK).is_file():
        raise ValueError(f"--work: {work} already holds other files; give an empty or new folder (Delphi replaces "
                         "its tree/ at every commit)")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / WORK_MARK).write_text("a scratch folder of `delphi eval --history`: tree/ and index/ are replaced\n")
    return folder


def evaluate_history(path: str | Path, limit: int = 50, baselines: tuple[str, ...] = BASELINES,
                     work: str | Path | None = None, log: Callable[[str], None] = lambda _m: None,
                     **overrides: Any) -> dict[str, Any]:
    from ..engine import Engine  # the engine imports evaluation's siblings; keep the import one-way at load

    git_dir = git_dir_of(path)
    if work:
        work = work_folder(work, path, git_dir)  # before the mining: a wrong folder costs nothing
    why_not = Counter[str]()
    samples = mine(path, limit, skipped=why_not, need_source=True)
    used = len({s["fix_commit"] for s in samples})
    if not samples:
        raise ValueError(f"no usable merged changes among the last {sum(why_not.values())} on the first-parent "
                         f"line of {path}" + (f" ({_reasons(why_not)})" if why_not else ""))
    dropped = 0  # questions whose answer files are not in the base tree (absent blobs)
    scratch = Path(work) if work else Path(tempfile.mkdtemp(prefix="delphi-eval-"))
    tree, index = scratch / "tree", scratch / "index"
    records: list[dict[str, Any]] = []
    bases: list[str] = []
    for s in samples:
        if s["base_commit"] not in bases:
            bases.append(s["base_commit"])
    skipped: list[str] = []
    try:
        for n, base in enumerate(bases, start=1):
            group = [s for s in samples if s["base_commit"] == base]
            # The base is the change's parent (the tree the question is asked of): both named, so a line of
            # the log ties back to its change (an agent newcomer read the parent's id as the change's).
            changes = ", ".join(dict.fromkeys(s["fix_commit"][:12] for s in group))
            log(f"[{n}/{len(bases)}] change {changes} asked at its parent {base[:12]}: "
                f"{_count(len(group), 'question')}")
            missing = checkout(git_dir, base, tree)
            if missing:
                skipped.append(f"{base[:12]}: {len(missing)} blobs absent from the object store")
            with Engine(tree, index_dir=str(index), **overrides) as eng:
                eng.index()
                base_sys = Baselines(Corpus.load(tree)) if baselines else None
                for s in group:
                    text, anchors = ask(s)
                    gold = [g for g in gold_of(s) if (tree / g).is_file()]
                    if not gold:
                        dropped += 1
                        continue
                    valid = [a for a in anchors if (tree / a).is_file()]
                    rec: dict[str, Any] = {"id": s["id"], "task": s["task_type"], "commit": s["fix_commit"],
                                           "title": s["query"]["pr_title"], "gold": gold, "systems": {}}
                    t0 = time.perf_counter()
                    ranked = [r["path"] for r in eng.context(text, anchors=valid, limit=100)["results"]]
                    rec["systems"]["engine"] = {**metrics(ranked, gold), "latency": time.perf_counter() - t0,
                                                "top": ranked[:10]}  # what was ranked, so a miss can be read
                    if base_sys is not None:
                        btext = text + ("\n" + "\n".join(valid) if valid else "")
                        for b in baselines:
                            t0 = time.perf_counter()
                            got = base_sys.heuristic(btext, valid) if b == "heuristic" else getattr(base_sys, b)(btext)
                            rec["systems"][b] = {**metrics(got, gold), "latency": time.perf_counter() - t0}
                    records.append(rec)
    finally:
        if not work:
            shutil.rmtree(scratch, ignore_errors=True)
    systems = ["engine", *baselines]
    return {"repository": str(Path(path).resolve()), "requested": limit, "changes": used,
            "changesRead": used + sum(why_not.values()), "skippedChanges": dict(why_not.most_common()),
            "shallow": is_shallow(git_dir),
            "questionsDropped": dropped, "questions": len(records), "baselines": list(baselines),
            "summary": summarise(records, systems), "records": records, "skipped": skipped}


def _count(n: int, noun: str) -> str:
    """``1 question``, ``2 questions``: a report a user reads says it right."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _reasons(counts: Counter[str] | dict[str, int]) -> str:
    return "; ".join(f"{n} {why}" for why, n in sorted(counts.items(), key=lambda kv: -kv[1]))


# What each column and baseline means, printed under the table (a number without its definition is noise).
LEGEND = {
    "MRR": "mean reciprocal rank: 1/rank of the first right file, averaged (1.0 = always first)",
    "R@k": "recall at k: the share of the right files found in the top k, averaged",
    "ΔMRR": "the engine's MRR minus that system's on the same questions, with a 95% paired bootstrap interval",
    "W/T/L": "questions where the engine put the first right file higher / at the same rank / lower than that system",
}
TASKS = {
    "intent2code": "the change's title and body -> the source files it modified",
    "code2test": "title and body plus the most-changed source file as anchor -> the test files it modified",
}
BASELINE_NOTES = {
    "bm25": "Okapi BM25 over whole files",
    "grep": "ripgrep over the question's identifiers, quoted terms and paths",
    "heuristic": "identifier-splitting BM25 kept to tests or sources by the question's words, "
                 "tests named after the anchor first",
    "lexical": "Agent Retrieval Bench's set-overlap ranker with path and symbol bonuses",
}


MIN_CI_QUESTIONS = 10  # fewer questions print no bootstrap interval


def render(result: dict[str, Any]) -> str:
    lines = [f"Delphi on the history of {result['repository']}: {_count(result['questions'], 'question')} from "
             f"{_count(result['changes'], 'merged change')}"]
    if result.get("skippedChanges"):
        gives = "gives" if result["changes"] == 1 else "give"
        lines.append(f"Read the last {_count(result['changesRead'], 'change')} on the first-parent line to find "
                     f"{result['changes']} that {gives} questions (asked for {result['requested']}); skipped: "
                     + _reasons(result["skippedChanges"]) + ".")
    if result.get("changes", 0) < result.get("requested", 0):
        window = max(6 * result["requested"], 50)
        why = (f"eval reads back at most {window} changes (6 per change asked, at least 50)"
               if result["changesRead"] >= window else
               "the clone is shallow (`git fetch --unshallow` reads more)" if result.get("shallow") else
               "the history has no more changes")
        lines.append(f"Only {result['changes']} of the {result['requested']} asked for: {why}.")
    if result.get("questionsDropped"):
        lines.append(f"{_count(result['questionsDropped'], 'question')} dropped: their files are missing from the "
                     "base tree.")
    lines += ["",
             "| task | system | n | MRR | " + " | ".join(f"R@{k}" for k in KS) + " | ΔMRR engine−system [95% CI] | W/T/L |",
             "|---|---|---|---|" + "---|" * len(KS) + "---|---|"]
    for task, rows in result["summary"].items():
        for name, r in rows.items():
            # A bootstrap over a handful of questions gives an interval that looks certain (one question:
            # `+1.000 [+1.000, +1.000]`; a team newcomer, session 42): not printed below MIN_CI_QUESTIONS.
            ci = (f" [{r['ci_mrr'][0]:+.3f}, {r['ci_mrr'][1]:+.3f}]" if r["n"] >= MIN_CI_QUESTIONS else
                  " [too few questions]")
            delta = "" if name == "engine" else f"{r['d_mrr']:+.3f}{ci}"
            wtl = "" if name == "engine" else f"{r['wins']}/{r['ties']}/{r['losses']}"
            lines.append(f"| {task} | {name} | {r['n']} | {r['mrr']:.3f} | "
                         + " | ".join(f"{r[f'r@{k}']:.3f}" for k in KS) + f" | {delta} | {wtl} |")
    if result["skipped"]:
        lines += ["", "Skipped: " + "; ".join(result["skipped"])]
    lines += ["", "Tasks: " + "; ".join(f"{t}: {d}" for t, d in TASKS.items() if t in result["summary"]) + "."]
    # Each change is asked of its parent's tree, written out without `.git`: the branches that read the history
    # (`commits`, `cochange`) and the history ranker are off, as they would read the change itself (its message,
    # its files changed together). Said, so the figures are not read as the whole of what a checkout gets (a team
    # newcomer, session 42).
    lines.append("Measured without the history branches (commits, cochange): each change is asked of its parent's "
                 "tree with no git history, which would hold the answer; in a checkout they are on.")
    lines += [f"{k}: {v}." for k, v in LEGEND.items()]
    names = [b for b in result.get("baselines", []) if b in BASELINE_NOTES]
    if names:
        lines.append("Baselines, measured in the same run on the same trees: "
                     + "; ".join(f"{b}: {BASELINE_NOTES[b]}" for b in names) + ".")
    return "\n".join(lines)
