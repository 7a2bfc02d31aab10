"""Design-canvas rollout directories (seed 000), written by tests/importers/seed_canvas.py as the seed's own
script writes them, import field by field and count as the seed's own summary counts them."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import polars as pl
import pytest

from evalkit import analysis as A
from evalkit.records import importers, rundir
from evalkit.types import EpisodeRecord
from tests.records.importers import seed_canvas as S


def records(run: Path) -> list[EpisodeRecord]:
    return list(rundir.read_records(run))


def seed_groups(run: Path) -> dict[tuple, dict]:
    """The seed's summary of the run, as its own script wrote it to summary.json."""
    return {
        (g["model"], g["surface"], g["mode"]): g
        for g in json.loads((run / "summary.json").read_text())["groups"]
    }


def test_the_issue_example_counts_three_episodes_not_four(seed_runs):
    run = seed_runs["canvas_issue"]
    assert importers.detect(run) == "design-canvas"
    assert len(list(rundir.read_records(run, latest=False))) == 4  # the failed job and its rerun
    s = A.summarise(A.load_runs(run)).row(0, named=True)
    seed = seed_groups(run)[(S.A, "tools", "reference")]
    assert (seed["n"], seed["mean_reward"], seed["failed"]) == (3, 0.5667, 0)
    assert (s["n"], s["scored"], s["unscored"], s["no_reward"]) == (3, 3, 0, 0)
    assert s["mean_reward"] == s["mean_reward_unscored_as_0"] == pytest.approx(1.7 / 3)


@pytest.mark.parametrize("name", ["canvas_issue", "canvas", "canvas_indexed"])
def test_counts_and_means_agree_with_the_seed_summary(seed_runs, name):
    """Per model × surface × mode: the same episodes; the seed's `failed` are evalkit's unscored plus the
    deadline episodes evalkit scores; the seed's mean is evalkit's rewards with, where evalkit has none,
    the seed's own reward each record keeps (`info.harness_reward`), a missing one counted 0.0."""
    run = seed_runs[name]
    df = A.load_runs(run)
    ours = {(r["model"], r["surface"], r["mode"]): r for r in A.summarise(df).iter_rows(named=True)}
    recs = records(run)
    assert set(ours) == set(seed_groups(run))
    for g, seed in seed_groups(run).items():
        mine = [r for r in recs if (r.model, r.surface, r.mode) == g]
        assert ours[g]["n"] == seed["n"] == len(mine)
        deadline = sum(r.end_reason == "deadline" for r in mine)
        assert ours[g]["unscored"] + deadline == seed["failed"]
        explained = [r.reward if r.reward is not None else r.info["harness_reward"] or 0.0 for r in mine]
        assert round(statistics.mean(explained), 4) == seed["mean_reward"]
        assert ours[g]["mean_tool_calls"] == pytest.approx(statistics.mean(r.tool_calls for r in mine))
        assert sum(r.usage.get("input", 0) for r in mine) == seed["input_tokens"]
        if all(r.reward is not None or r.error_class == "harness_error" for r in mine):
            # nothing to explain: evalkit's unscored-as-zero mean is the seed's mean
            assert round(ours[g]["mean_reward_unscored_as_0"], 4) == seed["mean_reward"]


def by_job(run: Path) -> dict[tuple, EpisodeRecord]:
    return {(r.model, r.surface, r.task_id, r.skin): r for r in records(run)}


def test_every_outcome_maps_as_documented(seed_runs):
    jobs = by_job(seed_runs["canvas"])
    t = [f"crello-test-{i:04d}" for i in range(4)]
    skins = {task: S.SKINS[i % len(S.SKINS)] for i, task in enumerate(t)}

    def got(model, surface, task, skin=None):
        r = jobs[(model, surface, task, skin or skins[task])]
        return r.end_reason, r.error_class, r.reward, r.auto_submitted

    assert got(S.A, "tools", t[0]) == ("submitted", None, 0.8, False)
    assert got(S.A, "tools", t[1]) == ("submitted", None, 0.5, False)  # failed job, resumed
    assert got(S.A, "tools", t[2]) == ("turn_limit", None, 0.4, True)
    assert got(S.A, "tools", t[3]) == ("no_tool_call", None, 0.3, True)
    err = jobs[(S.B, "tools", t[0], skins[t[0]])]
    assert got(S.B, "tools", t[0]) == ("error", "endpoint_error", None, True)
    assert err.error == err.info["harness_error"] == "ConnectionError: Connection reset by peer"
    assert err.info["harness_reward"] is None  # no grade after the failure: the seed counts it 0.0
    assert "the seed scored" in err.info["unscored_because"]
    assert got(S.B, "tools", t[1]) == ("deadline", None, 0.35, True)
    assert got(S.B, "tools", t[2]) == ("auto_submitted", None, 0.7, False)  # the env's own step limit
    assert got(S.B, "tools", t[3]) == ("submitted", None, None, False)  # no grade, no error: no reward
    assert jobs[(S.B, "tools", t[3], skins[t[3]])].info["harness_reward"] is None
    failed = jobs[(S.B, "gui", t[2], "canva")]  # failed twice: its skin is the one it was forced to
    assert (failed.end_reason, failed.error_class, failed.reward) == ("error", "harness_error", None)
    assert (
        failed.traceback
        and "browser context closed" in failed.error
        and failed.info["skin_forced"] == "canva"
    )
    assert got(S.B, "gui", t[2], "figma") == ("submitted", None, 0.4, False)


def test_an_endpoint_error_that_was_graded_says_what_the_seed_scored(seed_runs, tmp_path):
    """The first invocation's error record (auto-submitted, graded 0.6) as the latest one."""
    run = tmp_path / "r"
    S.rollout(
        run,
        [S.B],
        ["tools"],
        ["reference"],
        ["crello-test-0000"],
        entries={"crello-test-0000": (0, S.TASKS[0])},
        evalset_id=S.EVALSET_ID,
        plans=lambda j: S.Plan([[S.Call("add_element")], S.APIConnectionError("overloaded")], reward=0.6),
    )
    (rec,) = records(run)
    assert rec.error == "APIConnectionError: overloaded" and rec.error_class == "endpoint_error"
    assert rec.reward is None and rec.info["harness_reward"] == 0.6 and rec.grade["total"] == 0.6
    seed = seed_groups(run)[(S.B, "tools", "reference")]
    assert (seed["mean_reward"], seed["failed"]) == (0.6, 1)
    s = A.summarise(A.load_runs(run)).row(0, named=True)
    # nothing scored: no mean either way (not 0.0), and the seed's own number on request
    assert (s["unscored"], s["mean_reward"], s["mean_reward_unscored_as_0"]) == (1, None, None)
    h = A.summarise(A.load_runs(run), as_harness=True).row(0, named=True)
    assert (h["n"], h["mean_reward"], h["failed"]) == (1, 0.6, 1)


def test_fields_follow_the_writer(seed_runs):
    run = seed_runs["canvas"]
    jobs = by_job(run)
    rec = jobs[(S.A, "tools", "crello-test-0000", "figma")]
    line = next(
        d
        for d in map(json.loads, (run / "trace.jsonl").read_text().splitlines())
        if d.get("task_id") == rec.task_id and d["model"] == S.A and d["surface"] == "tools"
    )
    assert (rec.split, rec.tier, rec.difficulty_score) == ("test", "easy", 1.5)
    assert (
        rec.evalset_task == S.EVALSET_ID and rec.info["evalset_task"] == rec.task_id
    )  # id from summary.json
    assert (rec.episode_id, rec.prompt_version, rec.coordinates) == (line["episode_id"], "v3", "pixels")
    assert rec.usage == line["usage"] and rec.n_turns == 3 and rec.tool_calls == line["tool_calls"]
    assert [t.turn for t in rec.turns] == [1, 2, 3]  # the seed's turns 0, 1, 2
    stem = "anthropic_claude-sonnet-5__tools__reference__crello-test-0000"
    assert rec.frame0 == f"frames/{stem}/000.png"
    assert [t.frame for t in rec.turns] == [f"frames/{stem}/001.png", f"frames/{stem}/002.png", None]
    assert rec.render == f"renders/{stem}.png" and rec.target == "renders/crello-test-0000__target.jpg"
    for rel in (rec.frame0, rec.render, rec.target, *[t.frame for t in rec.turns if t.frame]):
        assert rundir.safe_path(run, rel) is not None, rel
    assert rec.turns[-1].calls[0].name == "submit" and rec.turns[0].model_s == 1.25
    assert rec.model_seconds == pytest.approx(3.75) and rec.env_seconds == pytest.approx(1.0)
    assert set(rec.grade) == set(S.GRADE_KEYS) and rec.final_doc["elements"][0]["id"] == "e1"
    assert not rec.auto_submitted and rec.cost_usd is None and rec.info["importer"] == "design-canvas"

    gui = jobs[(S.B, "gui", "crello-test-0001", "canva")]
    gstem = "hf_Qwen_Qwen3.6-35B-A3B_scaleway__gui__reference__crello-test-0001__canva"
    assert gui.coordinates == "normalized" and gui.frame0 == f"frames/{gstem}/000.png"
    shot = gui.turns[0].calls[0]
    assert shot.name == "screenshot" and shot.images == [f"frames/{gstem}/t000c0i0.png"]
    assert gui.turns[0].frame == f"frames/{gstem}/001.png"
    assert all(rundir.safe_path(run, p) for t in gui.turns for c in t.calls for p in c.images)

    bad = jobs[(S.B, "tools", "crello-test-0003", "slides")]
    first = bad.turns[0].calls[0]
    assert first.parse_error and not first.ok and first.args == {} and bad.parse_errors == 1
    assert not bad.turns[1].calls[0].parse_error and not bad.turns[1].calls[0].ok
    assert bad.tool_calls == 3 and bad.tool_errors == 2  # the seed counts the unparsed call in both


def test_a_failed_job_at_index_zero_is_replaced_by_its_rerun(seed_runs):
    run = seed_runs["canvas_indexed"]
    history = list(rundir.read_records(run, latest=False))
    assert [r.task_id for r in history] == ["index:0", "canvas-test-0007", "canvas-test-0000"]
    assert history[0].key == history[2].key and history[0].key != history[1].key
    df = A.load_runs(run)
    assert sorted(df["task_id"]) == ["canvas-test-0000", "canvas-test-0007"] and df["scored"].all()
    assert df["evalset_task"].null_count() == 2 and set(df["mode"]) == {"description"}
    recs = records(run)
    assert all(r.frame0 is None and r.target is None and not any(t.frame for t in r.turns) for r in recs)
    assert {r.info["index"] for r in recs} == {0, 7} and {r.skin for r in recs} == {"figma", "canva"}


def test_keys_never_collide_and_resume_replaces(seed_runs):
    run = seed_runs["canvas"]
    every = list(importers.read_foreign(run))
    lines = [json.loads(x) for x in (run / "trace.jsonl").read_text().splitlines()]
    assert len(every) == len(lines)
    by_seed_key: dict[tuple, set] = {}
    for d, rec in zip(lines, every, strict=True):
        by_seed_key.setdefault(S.seed_key(d), set()).add(rec["key"])
    assert all(len(keys) == 1 for keys in by_seed_key.values())  # one key per seed resume key
    assert len({next(iter(k)) for k in by_seed_key.values()}) == len(by_seed_key)  # and no two share one
    assert A.load_runs(run).height == len(by_seed_key) == 24


def test_gui_episodes_keep_their_frames_and_forced_skins(seed_runs):
    df = A.load_runs(seed_runs["canvas"]).filter(pl.col("surface") == "gui")
    assert (
        df.height == 16 and set(df["source"]) == {"design-canvas"} and set(df["skin"]) == {"figma", "canva"}
    )
    assert df.filter(pl.col("scored"))["n_frames"].to_list() == [2] * 15
