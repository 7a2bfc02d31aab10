"""`evalkit convert --to hf`: a run as a Hugging Face dataset folder that the real `datasets` library loads
(the episodes as Parquet, through the card's configs), one Session Trace Simple Format file per episode, and
back through `load_runs` with the same keys, rewards, turns, calls and conversation; sessions other
harnesses wrote (STS, Pi, Claude Code, Codex) read as episodes without a reward."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import polars as pl
import pytest

import evalkit as ek
from evalkit.cli import main
from evalkit.records import rundir, transcripts
from evalkit.records.exporters import convert
from tests.records.importers import seed_sessions, seed_tau2
from tests.records.test_convert import SAMPLE, _round_trip, _seen

datasets = pytest.importorskip("datasets")


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    dst = tmp_path_factory.mktemp("sample") / "sample-run"
    shutil.copytree(SAMPLE, dst, ignore=shutil.ignore_patterns(".evalkit"))
    return dst


@pytest.fixture(scope="module")
def dataset(sample, tmp_path_factory):
    out = tmp_path_factory.mktemp("hf") / "demo"
    assert main(["convert", str(sample), "--to", "hf", "-o", str(out)]) == 0
    return out


def _load(folder: Path) -> pl.DataFrame:
    ds = datasets.load_dataset(str(folder), cache_dir=str(folder.parent / ".hf-cache"))
    return pl.from_arrow(ds["train"].data.table)


def test_datasets_loads_the_episodes_with_the_rewards_load_runs_gives(sample, dataset):
    got = _load(dataset)
    want = ek.load_runs(sample)
    assert got.height == want.height == 36
    cols = ["key", "model", "env", "task_id", "repeat", "reward", "scored", "error_class", "cost_usd"]
    assert got.select(cols).sort("key").rows() == want.select(cols).sort("key").rows()
    assert set(got["run"]) == {"sample-run"} and got["offset"].null_count() == 36  # no local path leaks
    for f in got["session"]:
        assert (dataset / f).is_file()


def test_the_card_says_where_the_data_is_and_what_the_run_holds(dataset):
    from huggingface_hub import DatasetCard

    card = DatasetCard.load(dataset / "README.md")
    meta = card.data.to_dict()
    assert meta["configs"] == [
        {"config_name": "default", "data_files": [{"split": "train", "path": "data/episodes.parquet"}]}
    ]
    assert meta["evalkit"]["episodes"] == 36 and meta["evalkit"]["envs"] == ["canvas"]
    assert len(meta["evalkit"]["models"]) == 3 and meta["evalkit"]["unscored"] == 2
    assert "agent-traces" in meta["tags"] and meta["size_categories"] == ["n<1K"]
    assert "## Summary" in card.text and "| baseline:tracer | canvas |" in card.text  # evalkit's summary


def test_sessions_are_sts_as_the_hub_documents_it(dataset):
    files = sorted((dataset / "sessions").glob("*.jsonl"))
    assert len(files) == 36
    for f in files:
        lines = [json.loads(x) for x in f.read_text().splitlines()]
        head = lines[0]
        assert head["type"] == "session" and head["harness"] == "evalkit" and head["id"] and "name" in head
        asked: set[str] = set()
        for line in lines[1:]:
            assert line["type"] == "message"
            m = line["message"]
            assert m["role"] in ("system", "user", "assistant", "tool") and isinstance(m["content"], str)
            for c in m.get("toolCalls", []):
                assert isinstance(c["function"]["arguments"], str) and c["function"]["name"]
                asked.add(c["id"])
            if m["role"] == "tool":
                assert m["toolCallId"] in asked  # each result answers a call made before it
            for img in line["evalkit"].get("images", []):
                assert img["path"] is None or (f.parent / img["path"]).is_file()


def test_load_runs_reads_the_dataset_back(sample, dataset):
    _round_trip(sample, dataset)
    original = {r.key: r for r in rundir.read_records(sample)}
    images = 0
    for rec in rundir.read_records(dataset):
        seen = _seen(dataset, rec)
        assert seen == _seen(sample, original[rec.key])  # texts, notes and images (by their bytes) as sent
        images += sum(len(x[-1]) for x in seen)
    assert images >= 30


def test_a_tau2_run_goes_out_and_back_with_its_rewards(tmp_path):
    results = seed_tau2.write_results(tmp_path / "gpt-4.1-mini_airline_default_gpt-4.1_2trials.json")
    out = tmp_path / "tau2-hf"
    convert(results, "hf", out)
    got = _load(out).sort("task_id", "repeat")
    assert got["reward"].to_list() == [1.0, 1.0, 0.0, 1.0, 0.0, None]
    back = ek.load_runs(out).sort("task_id", "repeat")
    assert back["reward"].to_list() == got["reward"].to_list() and back["error_class"][-1] == "endpoint_error"
    rec = next(r for r in rundir.read_records(out) if r.task_id == "0")
    msgs = transcripts.messages(rec, out)
    assert msgs[1].note == transcripts.SCRIPTED and msgs[1].role == "assistant" and rec.n_turns == 4


def test_sessions_other_harnesses_wrote(tmp_path):
    root = seed_sessions.write_all(tmp_path / "traces")
    before = {p: p.stat().st_mtime_ns for p in root.rglob("*")}
    df = ek.load_runs(root).sort("env")
    assert {p: p.stat().st_mtime_ns for p in root.rglob("*")} == before  # read, never written
    assert df.select("env", "model", "task_id").rows() == [
        ("claude-code", "claude-opus-x", "cc-42"),
        ("codex", "gpt-5-codex", "cx-7"),
        ("my-agent", "my-model-1", "abc123"),
        ("pi", "claude-x", "pi-1"),
    ]
    assert df["reward"].null_count() == 4 and ek.summarise(df)["no_reward"].sum() == 4  # no reward, never 0
    assert df["n_turns"].to_list() == [2, 2, 2, 2] and df["tool_calls"].to_list() == [1, 1, 1, 1]
    assert df["tool_errors"].to_list() == [0, 0, 0, 1]  # Pi's isError
    pi = df.row(3, named=True)
    assert pi["input_tokens"] == 200 and pi["cache_read"] == 100 and pi["cost_usd"] == pytest.approx(0.006)
    cx = df.row(1, named=True)
    assert cx["input_tokens"] == 200 and cx["cache_read"] == 1000 and cx["reasoning_tokens"] == 12
    recs = {r.env: r for r in rundir.read_records(root)}
    said = [(m.role, m.text) for m in transcripts.messages(recs["codex"], root)]
    assert said == [("system", "You are Codex."), ("user", "Count lines."), ("assistant", ""),
                    ("tool", "42 file.txt"), ("assistant", "42 lines.")]  # fmt: skip
    assert recs["codex"].turns[0].reasoning == "Use wc." and recs["codex"].turns[0].calls[0].args == {
        "command": ["wc", "-l"]
    }
    cc = transcripts.messages(recs["claude-code"], root)
    assert [m.role for m in cc] == ["user", "assistant", "tool", "assistant"]  # one turn per message id
    assert "subagent work" not in [m.text for m in cc]  # the side chain is left out
    pi_msgs = transcripts.messages(recs["pi"], root)
    assert "Abandoned branch." not in [m.text for m in pi_msgs]  # the branch the last entry is not on
    assert pi_msgs[0].text == "List the files." and pi_msgs[0].images[0]["path"] is None  # not stored
    graded = ek.load_runs(root, grades=_grades(tmp_path))
    assert graded.filter(pl.col("task_id") == "abc123")["reward"].to_list() == [1.0]


def _grades(tmp_path: Path) -> Path:
    f = tmp_path / "grades.csv"
    f.write_text("task_id,reward\nabc123,1\n")
    return f


def test_one_session_file_is_a_run(tmp_path):
    f = seed_sessions.sts(tmp_path / "one.jsonl")
    df = ek.load_runs(f)
    assert df.height == 1 and df["env"][0] == "my-agent"


def test_cli_hf_refuses_before_any_work(sample, tmp_path, capsys, monkeypatch):
    for var in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))  # no token saved by `hf auth login` either
    out = tmp_path / "ds"
    assert main(["convert", str(sample), "--to", "hf", "-o", str(out), "--push", "me/demo"]) == 2
    err = capsys.readouterr().err
    assert "needs a Hugging Face token" in err and err.count("\n") == 1 and not out.exists()
    assert main(["convert", str(sample), "--to", "atif", "-o", str(out), "--push", "me/demo"]) == 2
    assert main(["convert", str(sample), "--to", "hf", "-o", str(out), "--push", "not a repo"]) == 2
    out.mkdir()
    (out / "x").write_text("")
    assert main(["convert", str(sample), "--to", "hf", "-o", str(out)]) == 2
    assert "is not empty" in capsys.readouterr().err


@pytest.mark.live
@pytest.mark.skipif(
    not (os.environ.get("HF_TOKEN") and os.environ.get("EVALKIT_HF_TEST_REPO")),
    reason="uploads to the Hub: needs HF_TOKEN and EVALKIT_HF_TEST_REPO (a dataset repo to write)",
)
def test_push_uploads_the_folder(sample, tmp_path, capsys):
    repo = os.environ["EVALKIT_HF_TEST_REPO"]
    assert main(["convert", str(sample), "--to", "hf", "-o", str(tmp_path / "up"), "--push", repo]) == 0
    assert f"as the dataset {repo}" in capsys.readouterr().out
    ds = datasets.load_dataset(repo, split="train")
    assert ds.num_rows == 36


def test_odd_session_lines_are_read_as_nothing_never_a_crash(tmp_path):
    f = seed_sessions.pi(tmp_path / "pi.jsonl")
    lines = [json.loads(x) for x in f.read_text().splitlines()]
    lines[3]["parentId"] = {"not": "an id"}  # the model change's parent: the branch walk stops there
    lines[5]["message"]["content"] = 7
    f.write_text("".join(json.dumps(x) + "\n" for x in lines) + "{torn\n")
    (rec,) = rundir.read_records(f)
    assert rec.n_turns == 2 and transcripts.messages(rec, tmp_path)
