"""Runs for the viewer tests: copies of the committed sample run, a small synthetic run with real PNG frames
(with the unscored episode the sample lacks), and a hostile one."""

from __future__ import annotations

import io
import json
import os
import shutil
from pathlib import Path

from PIL import Image as PILImage

from evalkit.records.rundir import FrameStore, TraceWriter, write_run_json
from evalkit.types import CallRecord, EpisodeRecord, Image, TurnRecord, episode_key

REPO = Path(__file__).resolve().parents[2]
APP = REPO / "viewer" / "app.py"
SAMPLE_RUN = REPO / "data" / "sample-run"

MODELS = ("baseline:tracer", "baseline:random")
TASKS = {
    "canvas-test-0001": "easy",
    "canvas-test-0002": "easy",
    "canvas-test-0003": "medium",
    "canvas-test-0004": "hard",
}
# reward[model][task]: the tracer solves 0001 and 0003, the random policy solves none; one env error.
REWARDS = {
    MODELS[0]: {
        "canvas-test-0001": 0.93,
        "canvas-test-0002": 0.41,
        "canvas-test-0003": 0.88,
        "canvas-test-0004": None,
    },
    MODELS[1]: {
        "canvas-test-0001": 0.12,
        "canvas-test-0002": 0.05,
        "canvas-test-0003": 0.30,
        "canvas-test-0004": 0.02,
    },
}


def rows(at, key: str = "table"):
    """The cells of table `key` (`viewer.rows`) as the browser gets them: text, one column per column id, in
    order (pandas, as AppTest's own tables). Raises if the page has no such table."""
    import pandas as pd

    for el in at.get("bidi_component"):
        if el.proto.component_name == "evalkit_rows" and el.proto.id.endswith(f"-{key}"):
            data = json.loads(el.proto.json)
            from viewer.rows import cells as read  # the cells as the browser reads them

            cells = {c["id"]: read(c, data["n"]) for c in json.loads(data["columns"])}  # JSON text
            frame = pd.DataFrame(cells, dtype=object)
            assert len(frame) == data["n"]
            return frame
    raise AssertionError(f"no table {key!r} on the page")


def sort_by(at, column: str):
    """What a click on `column`'s name in the Episodes table does (`viewer.table.sort_by`)."""
    from viewer.table import next_sort

    state = at.session_state
    state["_sort"] = next_sort(state["_sort"] if "_sort" in state else None, column, state["_sortable"])
    return at.run()


def open_row(at, row: int = 1):
    """What a click on row `row` (the # column) of the Episodes table does: open that episode, at its first
    search hit when a search is on (AppTest cannot click a row; the browser tests do)."""
    run, key, first = at.session_state["_shown"].row(row - 1)
    at.session_state["ep"] = (run, key)
    at.session_state["step"] = first
    at.session_state["view"] = "Episode"
    return at.run()


def png(color: tuple[int, int, int], size: tuple[int, int] = (64, 48)) -> Image:
    buf = io.BytesIO()
    PILImage.new("RGB", size, color).save(buf, "PNG")
    return Image(buf.getvalue())


def copy_sample_run(dest: Path) -> Path:
    """`data/sample-run` copied to `dest` (without its cached index)."""
    shutil.copytree(SAMPLE_RUN, dest, ignore=shutil.ignore_patterns(".evalkit"))
    return dest


def write_repeats_run(dest: Path) -> Path:
    """`data/sample-run` with a second repeat of each episode (half the reward), which the sample lacks."""
    copy_sample_run(dest)
    lines = []
    for raw in (SAMPLE_RUN / "trace.jsonl").read_text().splitlines():
        d = json.loads(raw)
        again = dict(d, repeat=1, reward=None if d["reward"] is None else round(d["reward"] / 2, 4))
        again["key"] = episode_key(d["model"], d["env"], d["surface"], d["mode"], d["task_id"], d["skin"], 1)
        lines += [json.dumps(d), json.dumps(again)]
    (dest / "trace.jsonl").write_text("\n".join(lines) + "\n")
    return dest


def write_sample_run(run: Path, n_turns: int = 3) -> Path:
    """Two offline models on four canvas tasks, three turns each, a frame per turn."""
    writer, store = TraceWriter(run), FrameStore(run)
    write_run_json(run, {"models": list(MODELS), "env": "canvas"})
    for mi, model in enumerate(MODELS):
        for ti, (task, tier) in enumerate(TASKS.items()):
            reward = REWARDS[model][task]
            target = store.put_render(f"{task}__target", png((200, 40 * ti, 40)))
            turns = []
            for t in range(1, n_turns + 1):
                frame = store.put(png(((30 * t) % 256, 60 * mi, 50 * ti)))  # distinct for t < 128
                shot = store.put(png((10, 10, (20 * t) % 256)))
                word = "zebra" if (mi, ti) == (0, 2) else "plain"
                calls = [
                    CallRecord(
                        id=f"c{t}",
                        name="add_element",
                        args={"kind": "rect", "x": 10 * t, "y": 5, "fill": "#ff0000"},
                        ok=t != 2,
                        result=f"added element e{t}" if t != 2 else "error: bad colour",
                    ),
                    CallRecord(id=f"v{t}", name="view_canvas", args={}, ok=True, result="", images=[shot]),
                ]
                turns.append(
                    TurnRecord(
                        turn=t,
                        text=f"{model} turn {t} on {task}: placing a rectangle",
                        reasoning=f"thinking about step {t} with a {word} idea",
                        stop="tool_use",
                        model_s=0.1 * t,
                        env_s=0.05 * t,
                        frame=frame,
                        calls=calls,
                    )
                )
            render = store.put_render(f"{model}_{task}_final", png(((30 * n_turns) % 256, 60 * mi, 50 * ti)))
            key = episode_key(model, "canvas", "tools", "reference", task, None, 0)
            writer.append(
                EpisodeRecord(
                    key=key,
                    model=model,
                    env="canvas",
                    surface="tools",
                    mode="reference",
                    task_id=task,
                    tier=tier,
                    reward=reward,
                    grade=None if reward is None else {"total": reward, "structure": reward, "visual": 0.5},
                    end_reason="error" if reward is None else "submitted",
                    error_class="env_error" if reward is None else None,
                    error="connection to the env was lost" if reward is None else None,
                    usage={"input": 1000, "output": 200},
                    cost_usd=0.001 * (ti + 1),
                    n_turns=n_turns,
                    tool_calls=2 * n_turns,
                    tool_errors=1,
                    seconds=1.5,
                    model_seconds=0.6,
                    env_seconds=0.3,
                    target=target,
                    frame0=store.put(png((255, 255, 255))),
                    render=render,
                    turns=turns,
                )
            )
    return run


HUGE = 10 * 1024 * 1024
SECRET = "TOP-SECRET-MARKER-93172"


def huge(fill: str, end: str) -> str:
    """A 10 MB string whose end can be recognised (to see that the last page reaches it)."""
    return fill * (HUGE - len(end)) + end


def write_hostile_run(root: Path) -> Path:
    """Traversal, absolute and symlinked frame paths, script in model text, 10 MB fields: turn text, grade,
    usage, model, task id, tool arguments and tool result."""
    outside = root / "outside"
    outside.mkdir(parents=True, exist_ok=True)
    secret_png = outside / "secret.png"
    secret_png.write_bytes(png((1, 2, 3)).data)
    (outside / "secret.txt").write_text(SECRET)
    run = root / "hostile"
    writer, store = TraceWriter(run), FrameStore(run)
    (run / "frames").mkdir(exist_ok=True)
    os.symlink(secret_png, run / "frames" / "link.png")
    ok = store.put(png((0, 128, 0)))
    script = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned=2"> ![x](http://127.0.0.1:9/x.png)'
    turns = [
        TurnRecord(
            turn=1,
            text=script,
            reasoning=f"**bold** {script}",
            frame="../outside/secret.png",
            calls=[
                CallRecord(
                    id="a",
                    name="<b>x</b>",
                    args={"html": script},
                    ok=False,
                    result=script,
                    images=["/etc/passwd", "../../outside/secret.txt"],
                )
            ],
        ),
        TurnRecord(turn=2, text="x" * (HUGE - 1) + "END-OF-HUGE", frame=str(secret_png.resolve())),
        TurnRecord(
            turn=3,
            text="after the huge one",
            frame="frames/link.png",
            calls=[
                CallRecord(
                    id="b",
                    name="big",
                    args={"blob": huge("a", "END-OF-ARGS")},
                    ok=True,
                    result=huge("r", "END-OF-RESULT"),
                )
            ],
        ),
        TurnRecord(turn=4, text="a good frame", frame=ok),
    ]
    writer.append(
        EpisodeRecord(
            key="evil",
            model="<script>alert(1)</script>" + huge("m", "END-OF-MODEL"),
            env="canvas",
            surface="tools",
            mode="reference",
            task_id="../../etc/passwd" + huge("t", "END-OF-TASK"),
            tier="easy",
            reward=0.5,
            grade={"total": 0.5, "note": script, "huge": huge("g", "END-OF-GRADE")},
            usage={"input": 10, "blob": huge("u", "END-OF-USAGE")},
            end_reason="submitted",
            target="/etc/hostname",
            render="../outside/secret.png",
            n_turns=4,
            turns=turns,
        )
    )
    with open(run / "trace.jsonl", "a") as f:
        f.write('{"torn": ')  # a torn last line as a crash leaves it
    return run


SEARCH_TURNS = {
    "bg": ["setting the background to 2 colours", "looking again"],
    "rounds": ["first pass", "checking (round 2)", "fine", "(ROUND 2) once more"],
    "near": ["Round  2 went well", "around 2 items, round 23"],
}
"""Model text of the episodes of the search run, turn by turn: `round 2` as a phrase is in `rounds` (steps 2
and 4) and `near` (step 1, across two spaces); `bg` has both words apart, `near` also `around 2` and
`round 23`."""


def write_search_run(run: Path) -> Path:
    """Three one-model episodes whose turns say SEARCH_TURNS (the last call of `near` fails)."""
    writer, store = TraceWriter(run), FrameStore(run)
    write_run_json(run, {"models": [MODELS[0]], "env": "canvas"})
    for i, (task, texts) in enumerate(SEARCH_TURNS.items()):
        turns = [
            TurnRecord(
                turn=t,
                text=text,
                reasoning="thinking" if t == 1 else "",
                frame=store.put(png((40 * t, 20 * i, 90))),
                calls=[
                    CallRecord(
                        id=f"c{t}",
                        name="view_canvas",
                        args={},
                        ok=(task, t) != ("near", 2),
                        result="ok" if (task, t) != ("near", 2) else "error: no canvas",
                    )
                ],
            )  # fmt: skip
            for t, text in enumerate(texts, 1)
        ]
        key = episode_key(MODELS[0], "canvas", "tools", "reference", task, None, 0)
        writer.append(
            EpisodeRecord(key=key, model=MODELS[0], env="canvas", surface="tools", mode="reference",
                          task_id=task, tier="easy", reward=0.5, end_reason="submitted", n_turns=len(turns),
                          turns=turns, frame0=store.put(png((250, 250, 250))))
        )  # fmt: skip
    return run


SCREEN = (1280, 800)
BUTTON = (560, 300, 760, 360)
"""Where the clicked element is on the screens of `write_screen_runs` (x1, y1, x2, y2 in screen pixels)."""
BLUE = (30, 90, 200)


def screen(kind: str) -> bytes:
    """A 1280 × 800 screenshot: `catalogue` has the blue button at BUTTON, `product` (what clicking it
    opens) has nothing there."""
    from PIL import ImageDraw

    im = PILImage.new("RGB", SCREEN, (250, 250, 250))
    d = ImageDraw.Draw(im)
    d.rectangle((0, 0, SCREEN[0], 60), fill=(40, 40, 60))
    if kind == "catalogue":
        d.rectangle(BUTTON, fill=BLUE)
        d.text((BUTTON[0] + 20, BUTTON[1] + 20), "Skillet", fill=(255, 255, 255))
    else:
        d.rectangle((80, 120, 400, 520), fill=(200, 160, 60))
        d.text((440, 120), "Cast-iron skillet: $45.00", fill=(0, 0, 0))
    buf = io.BytesIO()
    im.save(buf, "PNG")
    return buf.getvalue()


def write_ownloop_run(root: Path) -> Path:
    """One UI-TARS task as seed 001's runner writes it: step 1 clicks the button on the catalogue screen
    (`screens/step_01.png`), which opens the product page (`step_02.png`); step 2 answers."""
    task = root / "webapp-shop-skillet-price"
    (task / "screens").mkdir(parents=True)
    (task / "screens" / "step_01.png").write_bytes(screen("catalogue"))
    (task / "screens" / "step_02.png").write_bytes(screen("product"))
    (task / "screens" / "step_03.png").write_bytes(screen("product"))
    w, h = SCREEN
    box = f"[{BUTTON[0] / w:.4f}, {BUTTON[1] / h:.4f}, {BUTTON[2] / w:.4f}, {BUTTON[3] / h:.4f}]"
    rows = [
        {"step": 1, "url": "http://127.0.0.1:8312/shop", "raw": "Thought: open the skillet\nAction: click",
         "actions": [{"action_type": "click", "action_inputs": {"start_box": box}, "thought": "open it"}],
         "notes": [""], "fails": []},
        {"step": 2, "url": "http://127.0.0.1:8312/shop/skillet", "raw": "Action: finished(content='$45.00')",
         "actions": [{"action_type": "finished", "action_inputs": {"content": "$45.00"}}],
         "notes": [""], "fails": []},
    ]  # fmt: skip
    (task / "steps.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    session = {"task_id": task.name, "base": "http://127.0.0.1:8312", "answer": "$45.00",
               "status": "finished", "rounds": 2, "error": None, "record": [], "log": [], "seconds": 12.5,
               "parse_fails": 0, "action_errors": 0}  # fmt: skip
    (task / "session.json").write_text(json.dumps(session))
    return root


def write_gui_run(run: Path) -> Path:
    """One canvas-style gui episode in evalkit's own format: turn 1 clicks the button of the first screen
    (frame0) in pixels, then types; each turn's frame is the screen after it."""
    writer, store = TraceWriter(run), FrameStore(run)
    write_run_json(run, {"models": ["scripted"], "env": "canvas"})
    first, after = store.put(Image(screen("catalogue"))), store.put(Image(screen("product")))
    cx, cy = (BUTTON[0] + BUTTON[2]) / 2, (BUTTON[1] + BUTTON[3]) / 2
    said = f"clicked at ({cx:.0f}, {cy:.0f})"
    click = CallRecord(id="a", name="click", args={"x": cx, "y": cy}, result=said)
    typing = CallRecord(id="b", name="type_text", args={"text": "$45.00"}, result="typed 6 character(s)")
    turns = [
        TurnRecord(turn=1, text="clicking the button", frame=after, calls=[click]),
        TurnRecord(turn=2, text="typing the answer", frame=after, calls=[typing]),
    ]
    target = store.put_render("gui-task__target", png((200, 120, 40), (800, 600)))
    writer.append(
        EpisodeRecord(key=episode_key("scripted", "canvas", "gui", "reference", "gui-task", None, 0),
                      model="scripted", env="canvas", surface="gui", mode="reference", task_id="gui-task",
                      tier="easy", coordinates="pixels", reward=0.5, end_reason="submitted", n_turns=2,
                      tool_calls=2, target=target, frame0=first, render=after, turns=turns)
    )  # fmt: skip
    return run


def click_at(t: int) -> tuple[int, int]:
    """Where turn `t` of `write_long_run` clicked, in screen pixels of its 320 × 200 screens."""
    return 10 + (7 * t) % 300, 10 + (5 * t) % 180


def write_long_run(run: Path, turns: int) -> Path:
    """One computer-use episode of `turns` turns as a batch writes it (writer, frame store, transcript): a
    unique 320 × 200 screen per turn (its colours name the turn), a click per turn (`click_at`) whose result
    is the screen after it."""
    from evalkit.records import transcripts
    from evalkit.types import ToolOutcome

    store = FrameStore(run)
    write_run_json(run, {"models": ["scripted"], "env": "webapp"})
    key = episode_key("scripted", "webapp", "gui", "", "long-task", None, 0)
    tx = transcripts.Recorder(run, True, key)
    shots = [png((t % 256, (t * 7) % 256, 90), (320, 200)) for t in range(turns + 1)]
    tx.begin("Operate the browser.", [], "Buy the skillet.", [shots[0]])
    recs = []
    for t in range(1, turns + 1):
        x, y = click_at(t)
        call = CallRecord(id=f"c{t}", name="click", args={"x": x, "y": y}, result=f"clicked {t}",
                          images=[store.put(shots[t])])  # fmt: skip
        tx.results(t, [(call, ToolOutcome(f"clicked {t}", [shots[t]]))], "", False)
        recs.append(TurnRecord(turn=t, text=f"turn {t} of the long episode", stop="tool_use",
                               frame=call.images[0], calls=[call]))  # fmt: skip
    TraceWriter(run).append(
        EpisodeRecord(key=key, model="scripted", env="webapp", surface="gui", task_id="long-task",
                      coordinates="pixels", reward=1.0, end_reason="submitted", n_turns=turns,
                      tool_calls=turns, frame0=store.put(shots[0]), render=recs[-1].frame, turns=recs,
                      transcript=tx.to_dict())
    )  # fmt: skip
    return run
