"""Search matches whole words and phrases over every step (text, reasoning, tool calls), lists the matching
steps with a snippet, and opens an episode at its first hit."""

from __future__ import annotations

import polars as pl
from streamlit.testing.v1 import AppTest

from evalkit.view import search as search
from evalkit.view import support as vs
from tests.viewer.viewer_runs import APP, open_row, rows


def index(rows: list[tuple[str, int, str]]) -> pl.DataFrame:
    return pl.DataFrame(
        {"run": ["r"] * len(rows), "key": [k for k, _, _ in rows], "step": [s for _, s, _ in rows],
         "text": [t for _, _, t in rows]},
        schema=search.INDEX_SCHEMA,
    )  # fmt: skip


IDX = index(
    [
        ("bg", 1, "setting the background to 2 colours"),
        ("paren", 1, "first pass"),
        ("paren", 2, "checking (round 2)"),
        ("paren", 5, "(ROUND 2) again"),
        ("spaces", 1, "Round \n 2 went well"),
        ("near", 1, "around 2 items, round 23, surround 2"),
        ("punct", 1, "a+b (c) [x] #fff & ~y - z\\w"),
    ]
)


def keys(query: str) -> list[str]:
    return search.search(IDX, query).get_column("key").to_list()


def test_phrases_of_a_query():
    assert search.phrases("round 2") == ["round 2"]
    assert search.phrases('  "round   2"  "red circle" tail ') == ["round 2", "red circle", "tail"]
    assert search.phrases('"unclosed quote') == ["unclosed quote"] and search.phrases('""') == []


def test_whole_words_and_phrases_in_any_case():
    assert keys("round 2") == ["paren", "spaces"]  # not "backg·round … 2", "around 2", "round 23"
    assert keys("(round 2)") == ["paren"]  # the brackets are part of the phrase
    assert keys("ROUND") == ["paren", "spaces", "near"]  # "round 23" has the word; "around" does not
    assert keys("background") == ["bg"] and keys("backgro") == []
    assert keys('"round 2" "went"') == ["spaces"]  # every quoted phrase, each anywhere in the episode
    assert keys("a+b (c) [x] #fff & ~y - z\\w") == ["punct"]  # regex characters are literal
    assert keys("[unclosed") == [] and keys('""') == []


def test_matching_steps_first_hit_and_snippet():
    found = search.search(IDX, "round 2").filter(pl.col("key") == "paren").row(0, named=True)
    assert (found["first_hit"], found["hits"]) == (2, 2)
    steps = search.matching_steps(IDX, "round 2")
    assert steps.select("key", "step").rows() == [("paren", 2), ("paren", 5), ("spaces", 1)]
    rows = search.hit_rows(IDX, steps, "round 2")
    assert rows.get_column("snippet").to_list() == [
        "checking (round 2)",
        "(ROUND 2) again",
        "Round 2 went well",
    ]
    long = "x " * 200 + "the round 2 hit" + " y" * 200
    snip = search.snippet(long, "round 2", width=20)
    assert snip.startswith("…") and snip.endswith("…") and "round 2" in snip and len(snip) < 70


def test_the_index_holds_every_step_with_its_calls(search_run):
    idx = vs.text_index(search_run)
    assert idx.group_by("key").len().sort("key").get_column("len").to_list() == [2, 2, 4]
    near = idx.filter(pl.col("step") == 2).get_column("text").to_list()
    assert any("error: no canvas" in t and "view_canvas" in t for t in near)  # tool calls are searched
    assert search.search(idx, "no canvas").height == 1


def test_search_lists_matching_steps_and_opens_at_the_first_hit(monkeypatch, search_run):
    monkeypatch.setenv("EVALKIT_RUNS", str(search_run))
    at = AppTest.from_file(str(APP), default_timeout=60).run()
    at.text_input(key="f_search").set_value("round 2").run()
    assert not at.exception
    episodes, steps = rows(at, "table"), rows(at, "steps_table")
    assert sorted(episodes["task_id"]) == ["near", "rounds"]
    first = dict(zip(episodes["task_id"], episodes["first_hit"], strict=True))
    assert first == {"rounds": "2", "near": "1"}
    assert list(zip(steps["task_id"], steps["step"], strict=True)) == [
        ("rounds", "2"),
        ("rounds", "4"),
        ("near", "1"),
    ]
    assert steps["snippet"][2].startswith("Round 2 went well")
    assert "Matching steps: 3" in [s.value for s in at.subheader]
    row = list(episodes["task_id"]).index("rounds") + 1
    open_row(at, row)  # opens at the first hit, and names the others
    assert at.radio(key="view").value == "Episode" and at.slider(key="step").value == 2
    assert "Search hits at 2 step(s):" in [c.value for c in at.caption]
    at.button(key="hit_4").click().run()
    assert at.slider(key="step").value == 4
    assert not at.exception and not at.error


def test_the_index_grows_with_its_trace(tmp_path, search_run, monkeypatch):
    """A batch appends while the viewer searches: only the new bytes are read, an episode recorded again
    replaces its rows, a line still being written waits for its end."""
    import json
    import shutil

    run = tmp_path / "run"
    shutil.copytree(search_run, run)
    trace = run / "trace.jsonl"
    lines = trace.read_text().splitlines(keepends=True)
    trace.write_text(lines[0] + lines[1])
    starts = []
    real = search._complete_lines
    monkeypatch.setattr(
        search, "_complete_lines", lambda path, start: starts.append(start) or real(path, start)
    )
    assert set(vs.text_index(run)["key"]) == {json.loads(x)["key"] for x in lines[:2]}
    assert vs.text_index(run) is vs.text_index(run) and starts == [0]  # unchanged: nothing read
    again = json.loads(lines[0])
    again["turns"][0]["text"] = "a brand new round 2"
    with open(trace, "a") as f:
        f.write(json.dumps(again) + "\n" + lines[2][:40])  # a re-run of the first episode, half of the third
    idx = vs.text_index(run)
    assert starts == [0, len(lines[0]) + len(lines[1])]
    assert idx.height == 2 + 4 and search.search(idx, "brand new").height == 1
    assert search.search(idx, "setting the background").height == 0  # the first record no longer counts
    with open(trace, "a") as f:
        f.write(lines[2][40:])
    idx = vs.text_index(run)
    assert idx.height == 2 + 4 + 2 and search.search(idx, "round 2").height == 3
    trace.write_text(lines[0])  # rewritten (shorter): read again from the start
    assert vs.text_index(run).height == 2 and starts[-1] == 0
