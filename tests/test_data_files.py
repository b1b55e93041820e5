"""Large tabular data is indexed as its head (a newcomer's data-science repository, session 41: a 605 KB
`customers.csv` was 411 chunks of rows, most of what the index held, and said nothing to a reader)."""

from __future__ import annotations

from pathlib import Path

from delphi_ls import Engine
from delphi_ls.workspace.indexed_text import DATA_HEAD_LINES, indexed_text


def test_a_large_csv_is_indexed_as_its_header_and_first_rows_and_a_small_one_whole(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    (root / "data").mkdir(parents=True)
    rows = "".join(f"{i},cust{i}@example.com,{i % 7},{i * 3.5:.1f}\n" for i in range(4000))
    (root / "data" / "customers.csv").write_text("customer_id,email,churn_segment,lifetime_value\n" + rows)
    (root / "data" / "tiny.csv").write_text("plan,price\n" + "".join(f"p{i},{i}\n" for i in range(300)))
    (root / "load.py").write_text("import pandas as pd\n\n\ndef load():\n    return pd.read_csv('data/customers.csv')\n")
    assert (root / "data" / "customers.csv").stat().st_size > 64_000
    with Engine(root, index_dir=str(tmp_path / "idx")) as e:
        e.index()
        big = e.meta.chunks_of("data/customers.csv")
        assert big and max(c.end_line for c in big) == DATA_HEAD_LINES, [(c.start_line, c.end_line) for c in big]
        assert max(c.end_line for c in e.meta.chunks_of("data/tiny.csv")) == 301  # small: whole
        ans = e.context("which file has the churn_segment and lifetime_value columns", limit=5, budget_tokens=4000)
        assert ans["results"][0]["path"] == "data/customers.csv", [r["path"] for r in ans["results"]]
        packed = [p for p in ans["packed"] if p["path"] == "data/customers.csv"]
        assert packed and all(p["endLine"] <= DATA_HEAD_LINES for p in packed)
        assert not any(p["whole"] for p in packed)  # its head is not the whole file (a review, session 42)


def test_a_jsonl_log_and_its_prefix_read_alike() -> None:
    data = "".join(f'{{"event": "login", "n": {i}}}\n' for i in range(5000)).encode()
    read = indexed_text("logs/events.jsonl", data)
    assert read.head_only and read.text.count("\n") == DATA_HEAD_LINES
    assert not indexed_text("src/events.py", data).head_only
