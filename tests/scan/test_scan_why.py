"""`ek.why` against independent computations: rates are the tier table's task-weighted means and intervals of
"fired"; the paired differences are `ek.compare`'s test on the same values, Holm-adjusted across scanners;
checks against a person's labels count by hand; the Rogan–Gladen correction covers the truth where the raw
rate does not (a simulation); labels are appended safely; the first step where two trajectories part."""

from __future__ import annotations

import threading

import numpy as np
import polars as pl
import pytest

import evalkit as ek
from evalkit.analysis import why as W
from evalkit.analysis.stats import by_tier, compare, holm, mean_interval
from evalkit.errors import ConfigError
from evalkit.records import scans as store
from evalkit.records.rundir import TraceWriter, write_run_json
from evalkit.types import CallRecord, EpisodeRecord, TurnRecord


def _frames(rows: list[tuple]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(episodes, scans) from (model, env, task, repeat, scanner, kind, fired, error_class) rows."""
    eps, scans = {}, []
    for model, env, task, rep, scanner, kind, fired, err in rows:
        key = f"{model}|{env}|{task}|{rep}"
        eps[key] = {"run": "r", "key": key, "model": model, "env": env, "task_id": task, "repeat": rep,
                    "error_class": err, "tier": "t", "reward": 0.5, "scored": err is None}  # fmt: skip
        scans.append({"run": "r", "key": key, "model": model, "scanner": scanner, "kind": kind,
                      "phrase": f"does {scanner}", "fired": fired, "steps": [1] * fired})  # fmt: skip
    return pl.DataFrame(list(eps.values())), pl.DataFrame(scans)


def _synthetic(seed: int = 3) -> list[tuple]:
    rng = np.random.default_rng(seed)
    rows = []
    for model, p in (("A", 0.6), ("B", 0.15)):
        for t in range(14):
            env = "e1" if t < 10 else "e2"
            task = f"t{t % 10}"  # the same task id in two envs: two tasks
            for rep in range(1 + t % 3):
                err = "env_error" if (t, rep) == (2, 1) else None
                rows.append((model, env, task, rep, "loops", "model", bool(rng.random() < p), err))
                rows.append((model, env, task, rep, "quiet", "model", bool(rng.random() < 0.3), err))
                rows.append((model, env, task, rep, "infra", "infra", err is not None, err))
    return rows


def test_rates_are_the_tier_tables_means_and_intervals_of_fired():
    df, scans = _frames(_synthetic())
    rates = ek.why(df, scans)
    assert rates.columns == list(W.RATE_COLUMNS)
    assert rates["kind"].to_list()[-2:] == ["infra", "infra"]  # the infrastructure's apart, last
    for r in rates.iter_rows(named=True):
        sub = scans.filter((pl.col("scanner") == r["scanner"]) & (pl.col("model") == r["model"])).join(
            df, on=["run", "key", "model"]
        )
        if r["kind"] == "model":  # an episode the infrastructure ended is no evidence of the model's failure
            sub = sub.filter(pl.col("error_class").is_null())
        per_task: dict = {}
        for env, task, fired in sub.select("env", "task_id", "fired").rows():
            per_task.setdefault((env, task), []).append(float(fired))
        values = [sum(v) / len(v) for v in per_task.values()]
        assert r["n_tasks"] == len(per_task) == 14 and r["n_episodes"] == sub.height
        assert r["rate"] == pytest.approx(sum(values) / len(values))
        assert r["tasks_fired"] == sum(v > 0 for v in values)
        tier = by_tier(sub.with_columns(pl.col("fired").cast(pl.Float64).alias("reward"), pl.lit(True).alias(
            "scored"), pl.concat_str("env", "task_id").alias("_t"), pl.lit(0).alias("n_turns"),
            *[pl.lit(0).alias(c) for c in ("tool_calls", "tool_errors", "parse_errors", "tokens",
                                           "reasoning_tokens", "reasoning_chars", "seconds")],
            pl.lit(None, pl.Float64).alias("cost_usd")), by=["model"], cluster="_t")  # fmt: skip
        row = tier.filter(pl.col("tier") == "all").row(0, named=True)
        assert (r["rate"], r["ci_low"], r["ci_high"]) == pytest.approx(
            (row["mean_reward"], row["ci_low"], row["ci_high"])
        )


def test_a_configuration_of_the_env_makes_tasks_of_their_own():
    df, scans = _frames(_synthetic())
    split = df.with_columns(pl.when(pl.col("repeat") == 0).then(pl.lit("a")).otherwise(pl.lit("b")).alias(
        "env_config"))  # fmt: skip
    assert ek.why(split, scans)["n_tasks"].max() > ek.why(df, scans)["n_tasks"].max()


def test_paired_differences_are_compares_test_holm_adjusted_and_sorted():
    df, scans = _frames(_synthetic())
    diffs = ek.why(df, scans, a="A", b="B")
    assert diffs["diff"].abs().to_list() == sorted(diffs["diff"].abs().to_list(), reverse=True)
    assert diffs["p_holm"].to_list() == pytest.approx(holm(diffs["p_value"].to_list()))
    top = diffs.row(0, named=True)
    assert top["scanner"] == "loops" and top["separates"] and top["diff"] > 0.3
    per = W._counted(df, scans).filter((pl.col("scanner") == "loops") & pl.col("counted"))
    pseudo = per.select("model", "run", "env", "task_id", pl.col("value").alias("reward"),
                        pl.lit(True).alias("scored"), "error_class",
                        pl.col("run").alias("run_name"))  # fmt: skip
    ref = compare(pseudo, "A", "B", by=None).row(-1, named=True)
    assert (top["rate_a"], top["rate_b"], top["ci_low"], top["ci_high"], top["p_value"]) == pytest.approx(
        (ref["mean_a"], ref["mean_b"], ref["ci_low"], ref["ci_high"], ref["p_value"])
    )
    assert top["sentence"].startswith(f"A does loops in {W.pct(top['rate_a'])}% of tasks, B in")
    assert "points, 95% CI [" in top["sentence"] and "14 tasks" in top["sentence"]
    text = W.format_differences(diffs)
    assert text.startswith("What separates A from B (Holm p < 0.05):") and "does loops" in text
    with pytest.raises(ValueError, match="give both a and b"):
        ek.why(df, scans, a="A")


def test_checks_against_labels_count_by_hand_and_list_the_disagreements(tmp_path):
    df, scans = _frames(_synthetic())
    loops = scans.filter(pl.col("scanner") == "loops").head(30)
    # A person agrees but on every fifth episode, where they say the opposite.
    verdicts = [(k, f if i % 5 else not f) for i, (k, f) in enumerate(loops.select("key", "fired").rows())]
    path = tmp_path / "labels.csv"
    for key, yes in verdicts:
        store.label("r", key, "loops", yes, path=path)
    labels = store.read_labels(path=path)
    checked = ek.scanners.check(scans, labels).row(0, named=True)
    fired = dict(loops.select("key", "fired").rows())
    tp = sum(fired[k] and y for k, y in verdicts)
    fp = sum(fired[k] and not y for k, y in verdicts)
    fn = sum(not fired[k] and y for k, y in verdicts)
    assert (checked["labelled"], checked["tp"], checked["fp"], checked["fn"]) == (30, tp, fp, fn)
    assert checked["precision"] == pytest.approx(tp / (tp + fp))
    lo, hi = mean_interval(np.array([1.0] * tp + [0.0] * fp), tp + fp, pass_fail=True)
    assert (checked["precision_low"], checked["precision_high"]) == pytest.approx((lo, hi))
    off = ek.scanners.disagreements(scans, labels)
    assert off.height == 6 and (off["fired"] != off["label"]).all()
    rates = ek.why(df, scans, labels=labels)
    loop_rows = rates.filter(pl.col("scanner") == "loops")
    assert loop_rows["rate_corrected"].is_not_null().all() and loop_rows["precision"].is_not_null().all()
    assert "corrected" in W.format_rates(rates) and "precision / recall" in W.format_rates(rates)


def test_the_correction_is_rogan_gladen_and_its_interval_covers_where_the_raw_one_does_not():
    pi, lo, hi = W.corrected(0.3, 0.2, 0.4, tp=9, fp=1, fn=1, tn=19)
    assert pi == pytest.approx((0.3 + 0.95 - 1) / (0.9 + 0.95 - 1))
    assert lo < (0.2 + 0.95 - 1) / 0.85 and hi > (0.4 + 0.95 - 1) / 0.85  # widened by the labels' error
    assert W.corrected(0.3, 0.2, 0.4, tp=0, fp=3, fn=0, tn=5) == (None, None, None)  # no positive labelled
    assert W.corrected(0.3, 0.2, 0.4, tp=2, fp=8, fn=8, tn=2) == (None, None, None)  # no better than chance
    # A scanner with sensitivity 0.85 and specificity 0.8 over 100 tasks whose true rate is 0.3, labelled
    # on 40 failing and 60 clean episodes: the raw rate is biased up (to 0.395), the corrected one is not.
    rng = np.random.default_rng(7)
    truth, se, sp, reps, n = 0.3, 0.85, 0.8, 400, 100
    covered = raw_covered = 0
    for _ in range(reps):
        failing = rng.random(n) < truth
        fired = np.where(failing, rng.random(n) < se, rng.random(n) < 1 - sp)
        rate = fired.mean()
        rlo, rhi = mean_interval(fired.astype(float), n, pass_fail=True)
        tp = int((rng.random(40) < se).sum())
        tn = int((rng.random(60) < sp).sum())
        _, clo, chi = W.corrected(rate, rlo, rhi, tp=tp, fp=60 - tn, fn=40 - tp, tn=tn)
        covered += clo <= truth <= chi
        raw_covered += rlo <= truth <= rhi
    assert covered / reps >= 0.92 and raw_covered / reps < 0.8


def test_labels_are_appended_whole_from_many_threads_and_the_last_word_counts(tmp_path):
    run = tmp_path / "run"
    TraceWriter(run)  # an evalkit run (no episode yet): its labels go to <run>/.evalkit/scans/
    write_run_json(run, {"evalkit_version": ek.__version__})
    threads = [threading.Thread(target=lambda i=i: [store.label(run, f"k{i}-{j}", "loops", j % 2 == 0)
                                                    for j in range(25)]) for i in range(8)]  # fmt: skip
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    path = store.labels_path(run)
    assert path == run / ".evalkit" / "scans" / "labels.csv"
    text = path.read_text()
    assert text.count("key,scanner,label") == 1 and len(text.splitlines()) == 201
    with open(path, "a") as f:
        f.write("k0-0,loo")  # a kill mid-row
    store.label(run, "k0-0", "loops", False, note="looked again")
    got = store.read_labels(run)
    assert got.height == 200
    again = got.filter(pl.col("key") == "k0-0").row(0, named=True)
    assert again["label"] is False and again["note"] == "looked again" and again["run"] == str(run)
    with pytest.raises(ConfigError):
        store.label(run, "", "loops", True)
    with pytest.raises(ConfigError):
        store.label(run, "k", "loops", "yes")  # type: ignore[arg-type]


def _episode(model: str, calls: list[list[tuple[str, dict]]], end: str = "submitted") -> EpisodeRecord:
    turns = [TurnRecord(turn=i, calls=[CallRecord(name=n, args=a) for n, a in t]) for i, t in
             enumerate(calls, start=1)]  # fmt: skip
    return EpisodeRecord(model=model, env="e", surface="tools", mode="m", task_id="t1",
                         key=f"{model}-t1", turns=turns, end_reason=end, n_turns=len(turns))  # fmt: skip


def test_where_two_trajectories_part(tmp_path):
    first = [("add", {"x": 1, "y": 2})]
    a = _episode("A", [first, [("look", {})], [("submit", {})]])
    b = _episode("B", [[("add", {"y": 2, "x": 1})], [("add", {"x": 9})], [("submit", {})]])
    p = W.parting(a, b)
    assert p.step == 2 and p.a == "look {}" and p.b.startswith("add")
    assert W.parting(a, a).step is None
    short = _episode("B", [first])
    assert W.parting(a, short) == W.Parting(2, "look {}", "had ended (submitted)")
    run = tmp_path / "run"
    w = TraceWriter(run)
    for rec in (a, b):
        w.append(rec)
    got = ek.scanners.partings(ek.load_runs(run), "A", "B")
    assert got.select("task_id", "step", "a_did").rows() == [("t1", 2, "look {}")]


def test_a_difference_of_two_shares_has_no_bound_past_100_points():
    """A fires on 59 of 60 tasks, B on none: the paired interval (paired t's: 59 of 60) reaches past +100
    points there; a difference of two shares cannot, and the bound shown stops at +100."""
    rows = [
        (m, "e", f"t{t}", 0, "gives_up", "model", m == "A" and t > 0, None) for m in "AB" for t in range(60)
    ]
    df, scans = _frames(rows)
    d = ek.why(df, scans, a="A", b="B").row(0, named=True)
    assert d["diff"] == pytest.approx(59 / 60) and d["ci_high"] == 1.0 and d["ci_low"] < d["diff"]
    assert "+100]" in d["sentence"]
