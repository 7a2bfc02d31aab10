"""`evalkit bundle`: what it writes (every episode, its details and pictures, the paired differences), that it
refers to nothing outside the folder, keeps hostile runs' files and text out, never empties a folder of the
user's; and in real Chromium from file:// with the network blocked: the table, filters, an episode stepped
with the keys, the filmstrip, the transcript, an enlarged target, A vs B."""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import re
from pathlib import Path

import polars as pl
import pytest

from evalkit import analysis
from evalkit.cli import main
from evalkit.errors import ConfigError
from evalkit.view.bundle import build
from evalkit.view.bundle.episodes import TEXT_CAP
from tests.viewer.viewer_runs import HUGE, MODELS, SAMPLE_RUN, SECRET

TRACER, RANDOM = MODELS


def load(path: Path) -> tuple[str, list, object]:
    """A data script's call name, leading arguments and payload."""
    m = re.fullmatch(r'EK\.(\w+)\(((?:\d+, )*)"([A-Za-z0-9+/=]+)"\);\n', path.read_text())
    assert m, path
    args = [int(a) for a in m[2].split(", ") if a]
    return m[1], args, json.loads(gzip.decompress(base64.b64decode(m[3])))


def pieces(out: Path) -> dict[tuple[int, int], dict]:
    """Every piece of every episode, by (episode, part): its head is part -1."""
    found = {}
    for f in sorted((out / "data" / "ep").glob("*.js")):
        name, args, chunk = load(f)
        assert name == "chunk" and args == [int(f.stem)]
        found |= {(p["id"], p["part"]): p for p in chunk}
    return found


def episodes(out: Path) -> dict[int, dict]:
    """Each episode whole: its head with the steps and messages of its parts, in order."""
    found = pieces(out)
    eps = {}
    for (i, part), head in sorted(found.items()):
        if part != -1:
            continue
        parts = [found[(i, k)] for k in range(-(-max(head["n_steps"], 1) // head["part_size"]))]
        eps[i] = head | {
            "steps": [s for p in parts for s in p["steps"]],
            "messages": [
                m
                for k in sorted(k for (j, k) in found if j == i and k >= 0)
                for m in found[(i, k)]["messages"]
            ],
        }
    return eps


@pytest.fixture(scope="module")
def bundled(tmp_path_factory, synth_run):
    out = tmp_path_factory.mktemp("bundle") / "site"
    built = build([synth_run, SAMPLE_RUN], out)
    return out, built


def test_every_episode_with_its_details_and_pictures(bundled, synth_run):
    out, built = bundled
    name, _, index = load(out / "data" / "index.js")
    assert name == "index" and built.episodes == len(index["rows"]) == 8 + 36
    rows = [dict(zip(index["columns"], r, strict=True)) for r in index["rows"]]
    assert index["runs"] == ["synth", "sample-run"]
    eps = episodes(out)
    assert sorted(eps) == list(range(len(rows)))
    for i, r in enumerate(rows):
        e = eps[i]
        assert (e["model"], e["task_id"], e["mode"]) == (r["model"], r["task_id"], r["mode"])
        assert len(e["steps"]) == (r["n_turns"] or 0) + 1
        pics = [e["target"], e["render"], *(s["frame"] for s in e["steps"])]
        pics += [src for s in e["steps"] for c in s.get("calls", []) for src in c["images"]]
        pics += [i["src"] for m in e["messages"] for i in m["images"]]
        for p in filter(None, pics):
            data = (out / p).read_bytes()
            assert Path(p).stem == hashlib.sha256(data).hexdigest()  # stored once, by content
    unscored = next(e for e in eps.values() if e["error_class"])
    assert unscored["reward"] is None and unscored["error"] == "connection to the env was lost"
    failed = eps[0]["steps"][2]["calls"][0]
    assert (
        failed["ok"] is False
        and failed["result"] == "error: bad colour"
        and failed["line"].startswith("add_element(")
    )
    assert [m["role"] for m in eps[0]["messages"][:3]] == ["user", "assistant", "tool"]


def test_reset_arguments_who_answered_and_the_cost_as_the_viewer_says_them(tmp_path):
    from evalkit.records.rundir import TraceWriter, write_run_json
    from evalkit.types import EpisodeRecord, TurnRecord, episode_key

    run = tmp_path / "walks"
    key = episode_key("hf:org/m:a|b", "walk", "tools", "", "walk-1a2b3c4d", None, 0)
    turns = [TurnRecord(turn=1, text="Out.", stop="stop", provider="b", route="org/m:b")]
    rec = EpisodeRecord(key=key, model="hf:org/m:a|b", env="walk", surface="tools", task_id="walk-1a2b3c4d",
                        reset={"seed": 7, "level": "hard"}, reward=None, end_reason="answered", n_turns=1,
                        turns=turns, cost_usd=0.00004)  # fmt: skip
    write_run_json(run, {"models": [rec.model], "env": "walk"})
    TraceWriter(run).append(rec)
    (e,) = episodes(build([run], tmp_path / "site").path).values()
    assert json.loads(e["reset"]) == {"seed": 7, "level": "hard"}
    assert e["steps"][1]["provider"] == "b" and "provider" not in e["steps"][0]
    assert e["cost"] == "$0.000040"  # two significant digits below a cent, as the viewer says it


def test_the_paired_differences_are_the_analysis_ones(bundled, synth_run):
    out, _ = bundled
    _, _, index = load(out / "data" / "index.js")
    got = {(p["a"], p["b"], p["tier"]): p for p in index["pairs"]}
    df = analysis.load_runs([str(synth_run)])
    want = analysis.compare(df, TRACER, RANDOM).filter(pl.col("group") == "all").row(0, named=True)
    p = got[(f"{TRACER} · synth", f"{RANDOM} · synth", None)]
    assert p["diff"] == pytest.approx(want["diff"]) and (p["ci_low"], p["ci_high"]) == (None, None)
    assert (p["p_value"], p["mde"]) == (want["p_value"], None) == (0.25, None)
    assert (p["wins"], p["ties"], p["losses"], p["n_tasks"]) == (3, 0, 0, 3)
    assert (
        p["line"].startswith("No conclusion: only 3 tasks. A − B = +0.583")
        and "A − B = -0.583" in p["line_ba"]
    )


def test_the_why_section_is_the_analysis_one_its_episodes_linked_to_their_step(bundled, synth_run):
    """The bundle's why (issue 54): the rates table and the paired differences are `ek.why`'s; each
    scanner's episodes name their episode in the bundle and the position of the step it points to."""
    import evalkit as ek
    from evalkit.analysis import why as w

    out, _ = bundled
    _, _, index = load(out / "data" / "index.js")
    why = index["why"]
    df = analysis.load_runs([str(synth_run), str(SAMPLE_RUN)])
    scans = ek.scan(df)
    want = w.rates_table(w.why(df, scans))
    assert why["rates"]["columns"] == want.columns and why["rates"]["rows"] == [
        list(r) for r in want.iter_rows()
    ]
    pair = next(p for p in why["pairs"] if {p["a"], p["b"]} == {TRACER, RANDOM})
    diffs = w.why(df, scans, a=pair["a"], b=pair["b"])
    assert [r[0] for r in pair["table"]["rows"]] == diffs["scanner"].to_list()  # by size, as why sorts
    rows = [dict(zip(index["columns"], r, strict=True)) for r in index["rows"]]
    early = next(s for s in why["scanners"] if s["name"] == "early_finish")["episodes"]
    sample = [e for e in early if rows[e[0]]["run_label"] == "sample-run"]
    assert len(sample) == 1  # the sample's random policy submits at turn 3 of 12
    ep, pos, steps, evidence = sample[0]
    where = (rows[ep]["model"], rows[ep]["task_id"], rows[ep]["mode"])
    assert where == (RANDOM, "canvas-test-0061", "description")
    assert (pos, steps) == (3, [3]) and evidence == "submit at turn 3 of 12 with reward 0.0948"
    assert episodes(out)[ep]["steps"][pos]["turn"] == 3  # the position the page opens is that turn's step


def test_nothing_refers_outside_the_folder(bundled):
    out, _ = bundled
    for f in out.iterdir():
        if f.suffix in (".html", ".js", ".css"):
            text = f.read_text()
            # SVG's namespace is a name a page gives its elements, never an address it loads
            text = text.replace("http-equiv", "").replace('"http://www.w3.org/2000/svg"', "")
            assert not re.search(r"(https?:)?//[\w.-]+\.\w", text), f.name
            assert "innerHTML" not in text and "insertAdjacentHTML" not in text and "eval(" not in text


def test_a_hostile_run_leaks_nothing(tmp_path, hostile_run):
    out = tmp_path / "site"
    build([hostile_run], out)
    files = [p for p in out.rglob("*") if p.is_file()]
    secret = (hostile_run.parent / "outside" / "secret.png").read_bytes()
    assert not any(p.read_bytes() == secret for p in files)
    assert not any(SECRET.encode() in p.read_bytes() for p in files)
    (e,) = episodes(out).values()
    assert e["target"] is None and e["render"] is None  # outside the run
    assert [s["frame"] is None for s in e["steps"]] == [True, True, True, True, False]
    big = e["steps"][2]["text"]
    assert len(big) < TEXT_CAP + 100 and big.endswith(f"(cut here: {HUGE + 10:,} characters in the trace)")
    _, _, index = load(out / "data" / "index.js")
    assert all(len(c) <= 200 for r in index["rows"] for c in r if isinstance(c, str))


def test_a_folder_of_the_users_is_never_emptied(tmp_path, synth_run, capsys):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep")
    with pytest.raises(ConfigError, match="not empty and not an evalkit bundle"):
        build([synth_run], mine)
    assert (mine / "notes.txt").read_text() == "keep"
    site = tmp_path / "site"
    assert main(["bundle", str(synth_run), "-o", str(site)]) == 0
    assert "wrote" in capsys.readouterr().out
    (site / "stale.js").write_text("")
    assert main(["bundle", str(synth_run), "-o", str(site)]) == 0  # an earlier bundle is replaced
    assert not (site / "stale.js").exists() and (site / "index.html").exists()
    assert main(["bundle", str(tmp_path / "missing"), "-o", str(tmp_path / "x")]) == 2


@pytest.mark.browser
def test_the_bundle_from_file_with_the_network_blocked(browser, bundled):
    out, _ = bundled
    ctx = browser.new_context(viewport={"width": 1280, "height": 900})
    requests: list[str] = []

    def only_files(route):
        requests.append(route.request.url)
        route.continue_() if route.request.url.startswith("file://") else route.abort()

    ctx.route("**/*", only_files)
    page = ctx.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto((out / "index.html").as_uri())
    page.get_by_text("44 of 44 episodes").wait_for(timeout=15_000)
    page.locator('select[data-filter="run_label"]').select_option("synth")
    page.get_by_text("8 of 44 episodes").wait_for()
    page.locator("#episodes tbody tr").first.click()  # the tracer on canvas-test-0001
    page.get_by_text("Step 1 of 3").wait_for(timeout=15_000)  # the first step the model acted in
    frame = page.locator(".stepview figure img").nth(1)
    before = frame.get_attribute("src")
    page.keyboard.press("ArrowRight")
    page.get_by_text("Step 2 of 3").wait_for()
    assert frame.get_attribute("src") != before and "#/ep/0/2" in page.url
    page.keyboard.press("ArrowLeft")
    page.get_by_text("Step 1 of 3").wait_for()
    page.get_by_text(f"{TRACER} turn 1 on canvas-test-0001: placing a rectangle").first.wait_for()
    page.locator(".film button").nth(2).click()
    page.get_by_text("Step 2 of 3").wait_for()
    bad = page.locator("#panel details.bad summary")
    assert bad.count() == 1 and "bad colour" in bad.inner_text()
    # Target and frame at the same size side by side, the step's calls beside them, all inside 1280 px.
    target, pic = (page.locator(".stepview > figure").nth(i).bounding_box() for i in range(2))
    panel = page.locator("#panel").bounding_box()
    assert abs(target["y"] - pic["y"]) < 2 and abs(target["width"] - pic["width"]) < 2
    assert pic["x"] + pic["width"] <= panel["x"] and panel["x"] + panel["width"] <= 1280
    page.locator(".stepview figure img").first.click()
    page.locator("#lightbox").wait_for(state="visible")
    page.keyboard.press("Escape")
    page.get_by_text("Assistant · turn 2 · stop tool_use").wait_for()  # the transcript, below
    assert page.locator(".msg.now").count() >= 1
    page.get_by_text("Compare with another model on this task").click()
    page.locator("#difference").wait_for(timeout=15_000)
    said = page.locator("#difference").inner_text()  # the viewer's own line (3 tasks: no CI)
    assert said.startswith("No conclusion: only 3 tasks. A − B = +0.583 (all tiers) · no CI · p = 0.250")
    page.get_by_text("Step 1 of 3").wait_for()
    # Why: the rates, what separates two models, a scanner's episode opened at the step it points to
    page.locator("#nav-why").click()
    page.locator("#why-rates").wait_for(timeout=15_000)
    assert (
        "early_finish" in page.locator("#why-rates").inner_text() and page.locator("#why-diffs").count() == 1
    )
    page.locator('select[data-why="scanner"]').select_option("early_finish")
    page.locator("#why-fired a").first.click()
    page.get_by_text("Step 3 of").first.wait_for(timeout=15_000)
    assert re.search(r"#/ep/\d+/3$", page.url)
    # The step the scanner points to is marked with its evidence; another step says where it points
    flag = page.locator("#flag")
    said = flag.inner_text()
    assert said.startswith("⚑ early_finish fired at this step: ") and " at turn 3 " in said, said
    page.get_by_text("◀ Previous").click()
    assert "points to turn 3" in flag.inner_text()
    page.get_by_text("Go to step 3").click()
    page.get_by_text("Step 3 of").first.wait_for(timeout=15_000)
    assert "fired at this step" in flag.inner_text()
    assert all(u.startswith("file://") for u in requests) and len(requests) > 5
    assert errors == []
    ctx.close()


@pytest.mark.browser
def test_compare_opens_another_model_not_the_same_model_of_another_run(browser, tmp_path, sample_copy):
    """The stand-in of one run shares every task with the stand-in of its copy, which ranks first among the
    others: still, B is another model."""
    out = tmp_path / "site"
    build([SAMPLE_RUN, sample_copy], out)
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    page.goto((out / "index.html").as_uri() + "#/ep/2")  # the stand-in on canvas-test-0010, reference
    page.get_by_text("Compare with another model on this task").click()
    page.locator("#difference").wait_for(timeout=15_000)
    a, b = (page.locator(f'select[data-ab="{x}"]').input_value() for x in ("A", "B"))
    standin = "anthropic:evalkit-standin@low"
    assert a == f"{standin} · sample-run" and not b.startswith(standin), b
    page.close()


@pytest.mark.browser
def test_report_links_open_their_episodes_in_the_bundle(browser, tmp_path, synth_run):
    """`evalkit report --bundle`: each task the report lists links to its episode (and the best and worst
    tasks to A vs B on them) in the bundle beside it, from file:// with the network blocked."""
    out = tmp_path / "r" / "report.html"
    out.parent.mkdir()
    assert main(["report", str(synth_run), "-o", str(out), "--bundle"]) == 0
    assert (tmp_path / "r" / "report-bundle" / "index.html").exists()
    ctx = browser.new_context(viewport={"width": 1280, "height": 720})
    ctx.route("**/*", lambda r: r.continue_() if r.request.url.startswith("file://") else r.abort())
    page = ctx.new_page()
    page.goto(out.as_uri())
    pairs = page.locator('a[href*="#/find/"]').evaluate_all("as => as.map(a => a.getAttribute('href'))")
    assert pairs and all(h.startswith("report-bundle/index.html#/find/synth/") for h in pairs)
    # The unscored episode (the tracer on canvas-test-0004) in the table of episodes without a score.
    page.locator("td a", has_text="canvas-test-0004").click()
    page.get_by_text("Reward unscored").wait_for(timeout=15_000)
    assert (
        "baseline:tracer · canvas tools/reference · canvas-test-0004"
        in page.locator("#identity").inner_text()
    )
    page.go_back()
    # The best task for A: its heading opens A vs B on the two episodes, its pictures each episode.
    best = page.locator("b a", has_text="best for baseline:tracer").first
    task = best.inner_text().split(": ")[1].split(" · ")[0]
    best.click()
    page.locator("#difference").wait_for(timeout=15_000)
    heads = page.locator(".pair").first.inner_text()
    assert "baseline:tracer · synth" in heads and "baseline:random · synth" in heads
    assert page.locator("#pairs tr.sel td").first.inner_text() == task
    # The page says which task it is on, and its row is in the list's view.
    assert page.locator("#ab-task").inner_text().startswith(f"Task {task} · tools/reference")
    inside = page.evaluate("""() => {
      const s = document.querySelector('#pairs tr.sel').getBoundingClientRect();
      const box = document.querySelector('#pairs').closest('.scroll').getBoundingClientRect();
      return s.top >= box.top - 1 && s.bottom <= box.bottom + 1; }""")
    assert inside
    ctx.close()


LONG = 130
"""Turns of the long episode: steps 0 to 131 (the screen its last click left), in three parts of 48."""


@pytest.fixture(scope="module")
def long_bundled(tmp_path_factory):
    """A bundle of one long computer-use episode, each piece in a file of its own (to see which are read)."""
    from evalkit.view import bundle as bundle_module
    from tests.viewer.viewer_runs import write_long_run

    run = write_long_run(tmp_path_factory.mktemp("long") / "long", LONG)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(bundle_module, "CHUNK_BYTES", 1)
        out = build([run], tmp_path_factory.mktemp("long-bundle") / "site").path
    return run, out


def test_a_long_episode_in_parts_its_marks_as_positions_its_frames_once(long_bundled):
    from tests.viewer.viewer_runs import click_at

    run, out = long_bundled
    found = pieces(out)
    head = found[(0, -1)]
    assert (head["n_steps"], head["part_size"], head["first"], head["ends_on_screen"]) == (
        LONG + 2,
        48,
        1,
        True,
    )
    assert len(json.dumps(head)) < 3000  # the head says nothing of the steps: it is as small at any length
    for k in range(3):
        assert [s["index"] for s in found[(0, k)]["steps"]] == list(
            range(48 * k, min(48 * (k + 1), LONG + 2))
        )
        turns = {m["turn"] for m in found[(0, k)]["messages"]}  # the transcript's turns of those steps
        assert turns == set(range(48 * k, min(48 * (k + 1), LONG + 1)))
    steps = [s for k in range(3) for s in found[(0, k)]["steps"]]
    for s in steps[1 : LONG + 1]:  # each click where it landed on the screen it was taken on, as numbers
        assert s["marks"] == {"w": 320, "h": 200, "r": 6, "marks": [
            {"n": 1, "points": [list(map(float, click_at(s["index"])))], "double": False}]}  # fmt: skip
    assert "marks" not in steps[0] and "marks" not in steps[-1]
    # Every screen once, as the run keeps it: no second picture with the marks drawn in.
    frames = sorted(p.read_bytes() for p in (run / "frames").rglob("*.png"))
    assert sorted(p.read_bytes() for p in (out / "img").rglob("*.*")) == frames and len(frames) == LONG + 1


@pytest.mark.browser
def test_a_long_episode_steps_without_building_the_page_again(browser, long_bundled):
    """Opened at step 100, the page reads the episode's head and the parts around the step, not the rest;
    a step changes the step's part of the page, not the page (its header, picture and transcript are the
    same elements); the transcript shows the turns around the step; the slider's End key jumps to the end."""
    from tests.viewer.viewer_runs import click_at

    _, out = long_bundled
    ctx = browser.new_context(viewport={"width": 1280, "height": 720})
    read: list[str] = []
    ctx.route(
        "**/*",
        lambda r: (
            read.append(r.request.url),
            r.continue_() if r.request.url.startswith("file:") else r.abort(),
        ),
    )
    page = ctx.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto((out / "index.html").as_uri() + "#/ep/0/100")
    page.get_by_text(f"Step 100 of {LONG + 1}").wait_for(timeout=15_000)
    page.locator("svg.marks circle").first.wait_for(state="attached")
    x, y = click_at(100)
    assert page.locator("svg.marks circle").first.evaluate(
        "c => [+c.getAttribute('cx'), +c.getAttribute('cy')]"
    ) == [x, y]
    page.wait_for_timeout(300)  # the part before is loaded too (the step is near its part's start)
    data = sorted(u.rsplit("/", 1)[1] for u in read if "/data/ep/" in u)
    assert data == ["0000.js", "0002.js", "0003.js"]  # the head, parts 1 and 2; never part 0
    kept = "window.__kept = ['.head', '#frame img', '#transcript'].map(s => document.querySelector(s))"
    page.evaluate(kept)
    turns = page.locator("#transcript .msg").evaluate_all("ms => ms.map(m => +m.dataset.turn)")
    assert turns and set(turns) <= set(range(100, 104))
    elements = page.evaluate("document.getElementsByTagName('*').length")
    page.keyboard.press("ArrowRight")
    page.get_by_text(f"Step 101 of {LONG + 1}").wait_for()
    same = page.evaluate(
        "['.head', '#frame img', '#transcript'].map((s, i) => document.querySelector(s) === window.__kept[i])"
    )
    assert same == [True, True, True]
    assert page.locator(".msg.now").evaluate_all("ms => ms.map(m => +m.dataset.turn)") == [101, 101]
    assert page.locator("#frame img").get_attribute("src") == found_frame(out, 101)
    assert page.evaluate("document.getElementsByTagName('*').length") <= elements + 10
    page.locator(".steps input[type=range]").first.focus()
    page.keyboard.press("End")
    page.get_by_text(f"End (step {LONG + 1} of {LONG + 1})").wait_for()
    assert page.locator("svg.marks").count() == 0  # the screen the last click left: nothing acted on it
    page.locator("#frame img").click()  # enlarged, with its marks when it has some
    page.locator("#lightbox").wait_for(state="visible")
    assert errors == []
    ctx.close()


def found_frame(out: Path, pos: int) -> str:
    return pieces(out)[(0, pos // 48)]["steps"][pos % 48]["frame"]


@pytest.mark.browser
def test_a_text_episode_shows_its_plans_at_their_step(browser, berth_server, tmp_path):
    """A berth episode (no pictures): each step shows what the model sent (the plan's entries) beside what the
    environment answered (its verdict), read from the step's part."""
    from evalkit.run.episode import run_episode

    run = tmp_path / "berth"
    rec = run_episode("baseline:greedy", berth_server, "berth-test-0002", out=run)
    out = build([run], tmp_path / "site").path
    (step,) = [s for (i, k), p in pieces(out).items() if k >= 0 for s in p["steps"] if s.get("turn") == 1]
    assert [p["n"] for p in step["plans"]] == [1] and step["plans"][0]["tool"] == rec.plans[0].tool
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    page.goto((out / "index.html").as_uri() + "#/ep/0/1")
    page.get_by_text("What the environment answered").wait_for(timeout=15_000)
    entries = f"Plan 1 ({rec.plans[0].tool}): {len(rec.plans[0].plan)} entries"
    page.get_by_text(entries).wait_for()
    assert page.get_by_text(re.compile(r"^Plan 1 \(\w+\): (in)?feasible, objective")).count() == 1
    page.close()
