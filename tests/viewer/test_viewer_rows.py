"""The table the browser draws (`viewer.rows`): what its message carries, and that a new page does not make
it again."""

from __future__ import annotations

import json

import polars as pl
from streamlit.testing.v1 import AppTest

from tests.viewer.viewer_runs import APP, SAMPLE_RUN, rows
from viewer import rows as vr


def test_columns_sent_compactly_read_back_as_their_cells():
    """The "#" of 10,000 rows is its first number and step; repeated values are a dictionary and a code per
    row as text (one digit below 90 values, two below 8,100). Read back, each cell is the text it was."""
    n = 10_000
    cases = {
        "#": pl.Series("#", range(1, n + 1)),
        "back": pl.Series("back", range(n, 0, -1)),
        "model": pl.Series("model", [f"baseline:m{i % 4}" for i in range(n)]),
        "task": pl.Series("task", [f"task-{i % 500:04d}" for i in range(n)]),
        "reward": pl.Series("reward", [None if i % 50 == 0 else (i % 1000) / 1000 for i in range(n)]),
        "tiny": pl.Series("tiny", [3, 1, 2]),
    }
    sent = {k: vr._column(k, s, {"type_config": {"format": "%.3f"}} if k == "reward" else {})
            for k, s in cases.items()}  # fmt: skip
    assert sent["#"]["from"] == 1 and sent["#"]["by"] == 1 and "values" not in sent["#"]
    assert sent["back"]["from"] == n and sent["back"]["by"] == -1
    assert isinstance(sent["model"]["codes"], str) and len(sent["model"]["codes"]) == n
    assert isinstance(sent["task"]["codes"], str) and len(sent["task"]["codes"]) == 2 * n
    for k, s in cases.items():
        assert vr.cells(sent[k], s.len()) == vr._cells(s, "%.3f" if k == "reward" else None).to_list(), k
    text = json.dumps(list(sent.values()))
    assert len(text) < 100_000  # as numbers and lists it was 300 KB
    assert json.loads(text) == list(sent.values())  # nothing in the codes needs escaping to survive


def test_a_new_page_does_not_make_the_table_again(monkeypatch):
    """The table's cells are made once for every page that shows them (a 10,000-row table was made again by
    each page that opened)."""
    monkeypatch.setenv("EVALKIT_RUNS", str(SAMPLE_RUN))
    first = AppTest.from_file(str(APP), default_timeout=60).run()
    made = []
    real = vr._column
    monkeypatch.setattr(vr, "_column", lambda *a: made.append(a[0]) or real(*a))
    again = AppTest.from_file(str(APP), default_timeout=60).run()
    assert not first.exception and not again.exception
    assert rows(again).equals(rows(first))
    assert made == []
