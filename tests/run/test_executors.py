"""The executors: Ray runs a batch as the threads do, and the driver alone writes the run."""

from __future__ import annotations

import json
import shutil

import pytest

from evalkit.errors import ConfigError
from evalkit.records.transcripts import messages
from evalkit.run.batch import run_batch

MODELS = ["baseline:tracer", "baseline:random"]


def outcome(run_dir) -> dict:
    """What an episode came to, by key: everything but times and the env's episode ids."""
    out = {}
    for line in (run_dir / "trace.jsonl").read_text().splitlines():
        r = json.loads(line)
        assert r["key"] not in out, "a key written twice"
        turns = [(t["frame"], [(c["name"], c["args"], c["ok"]) for c in t["calls"]]) for t in r["turns"]]
        doc = {k: v for k, v in (r["final_doc"] or {}).items() if k != "episode_id"}
        out[r["key"]] = (r["reward"], r["grade"], r["end_reason"], r["error"], r["n_turns"], r["tool_calls"],
                         r["frame0"], r["render"], r["target"], doc, turns)  # fmt: skip
    return out


def pictures(run_dir) -> dict:
    found = [*run_dir.glob("frames/*/*"), *run_dir.glob("renders/*")]
    return {p.relative_to(run_dir).as_posix(): p.read_bytes() for p in found}


def test_ray_runs_the_batch_the_threads_run(ray_local, canvas_server, tmp_path):
    kw = dict(tasks=3, max_turns=8, concurrency=3, progress=False)
    threads = run_batch(MODELS, canvas_server, out=tmp_path / "threads", **kw)
    on_ray = run_batch(MODELS, canvas_server, out=tmp_path / "ray", executor="ray", **kw)
    assert (threads.ran, on_ray.ran, on_ray.errors) == (6, 6, 0)
    assert outcome(tmp_path / "ray") == outcome(tmp_path / "threads")
    ray_pictures = pictures(tmp_path / "ray")
    assert ray_pictures and ray_pictures == pictures(tmp_path / "threads")
    for r in on_ray.records():
        assert (tmp_path / "ray" / r.frame0).is_file() and (tmp_path / "ray" / r.render).is_file()
    assert (tmp_path / "ray" / "summary.json").is_file()
    # What the model saw comes back too: the shared texts the transcripts reference, and no progress file.
    said = {r.key: [(m.role, m.text) for m in messages(r, tmp_path / "threads")] for r in threads.records()}
    for r in on_ray.records():
        assert [(m.role, m.text) for m in messages(r, tmp_path / "ray")] == said[r.key]
        assert r.transcript and not any("(text not found" in m.text for m in messages(r, tmp_path / "ray"))
    assert not list((tmp_path / "ray").glob(".live/*"))

    # Resume on Ray: what the threads left unfinished, and nothing else.
    shutil.copytree(tmp_path / "threads", tmp_path / "resumed")
    lines = (tmp_path / "resumed" / "trace.jsonl").read_text().splitlines(keepends=True)
    (tmp_path / "resumed" / "trace.jsonl").write_text("".join(lines[:4]))
    again = run_batch(MODELS, canvas_server, out=tmp_path / "resumed", executor="ray", **kw)
    assert (again.ran, again.skipped) == (2, 4)
    assert outcome(tmp_path / "resumed") == outcome(tmp_path / "threads")


def test_executor_mistakes_are_config_errors(canvas_server, tmp_path):
    with pytest.raises(ConfigError, match="unknown executor"):
        run_batch(MODELS, canvas_server, out=tmp_path / "a", tasks=1, executor="dask", progress=False)
    with pytest.raises(ConfigError, match="--ray-address needs --executor ray"):
        run_batch(MODELS, canvas_server, out=tmp_path / "b", tasks=1, ray_address="x:1", progress=False)
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


@pytest.mark.parametrize("executor", ["threads", "ray"])
def test_a_refused_key_stops_its_model_on_either_executor(
    executor, request, canvas_server, tmp_path, monkeypatch
):
    """A model whose endpoint answers 401 is stopped at its first episode (nothing of it written, the rest
    left for a resume); the other model runs to the end; the batch's status says a setup error."""
    from tests.faults.drivers import MODEL, StandIn
    from tests.providers.fakes import Reply

    if executor == "ray":
        request.getfixturevalue("ray_local")
    model = StandIn()
    plain = model.reply
    model.server.reset(
        default=lambda body: Reply(status=401) if body["model"].endswith("-badkey") else plain(body)
    )
    monkeypatch.setenv("VLLM_BASE_URL", model.base_url)
    try:
        run = run_batch([MODEL, f"{MODEL}-badkey"], canvas_server, out=tmp_path / "run", tasks=4, max_turns=4,
                        concurrency=2, progress=False, executor=executor)  # fmt: skip
    finally:
        model.stop()
    assert list(run.refused) == [f"{MODEL}-badkey"] and "VLLM_API_KEY" in run.refused[f"{MODEL}-badkey"]
    assert {r.model for r in run.records()} == {MODEL} and run.ran - run.errors >= 4
    assert run.not_run >= 1 and run.exit_status == 2


def test_cluster_settings_are_checked_before_any_work(canvas_server, tmp_path):
    """A Ray Client address is refused in one line; the node timeout and runner placement are knobs."""
    with pytest.raises(ConfigError, match=r"Ray Client \(ray://\) is not supported"):
        run_batch(MODELS, canvas_server, out=tmp_path / "a", tasks=1, executor="ray",
                  ray_address="ray://head:10001", progress=False)  # fmt: skip
    with pytest.raises(ConfigError, match="--ray-node-timeout must be a finite number > 0"):
        run_batch(MODELS, canvas_server, out=tmp_path / "b", tasks=1, executor="ray", ray_node_timeout=0,
                  progress=False)  # fmt: skip
    with pytest.raises(ConfigError, match="unknown ray runners 'gpu'"):
        run_batch(MODELS, canvas_server, out=tmp_path / "c", tasks=1, executor="ray", ray_runners="gpu",
                  progress=False)  # fmt: skip
    assert not any((tmp_path / d).exists() for d in "abc")


def test_what_travels_to_the_nodes_is_declared_once(monkeypatch):
    from evalkit.run.cluster import travelling_environ

    monkeypatch.setenv("EVALKIT_CHROMIUM", "/opt/chromium")
    monkeypatch.setenv("OWNLOOP_API_KEY", "k")
    monkeypatch.setenv("UNRELATED_SECRET", "no")
    got = travelling_environ()
    assert got["EVALKIT_CHROMIUM"] == "/opt/chromium" and got["OWNLOOP_API_KEY"] == "k"
    assert "UNRELATED_SECRET" not in got
