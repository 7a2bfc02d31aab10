"""A hostile run directory: traversal, absolute and symlinked paths, script in model text, a 10 MB field.
The viewer stays up, refuses every file outside the run and renders trace text as text."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from evalkit import viewer_support as vs
from tests.viewer.viewer_runs import APP, HUGE, SECRET


def everything(at: AppTest) -> list[str]:
    out = []
    for kind in ("text", "caption", "code", "markdown", "warning", "error", "info", "subheader"):
        out += [str(e.value) for e in getattr(at, kind)]
    out += [str(m.value) for m in at.metric] + [str(d.value) for d in at.dataframe]
    return out


def images(at: AppTest) -> list[str]:
    return [c for img in at.image for c in img.captions]


def test_hostile_run_stays_up_and_leaks_nothing(monkeypatch, hostile_run):
    monkeypatch.setenv("EVALKIT_RUNS", str(hostile_run))
    at = AppTest.from_file(str(APP), default_timeout=60)
    at.query_params.update(view="episode", run="hostile", episode="evil", step="1")
    at.run()
    assert not at.exception, at.exception
    assert any(
        "<script>window.__pwned = 1</script>" in v for v in (e.value for e in at.text)
    )  # shown as text
    for md in at.markdown:  # nothing from the trace reaches Markdown unescaped
        assert "<script" not in md.value and "](http" not in md.value and "<b>" not in md.value
    assert images(at) == []  # frame, target and final render all point outside the run
    assert sum("missing or outside the run" in c.value for c in at.caption) >= 3

    at.button(key="step_next").click().run()  # the 10 MB turn, refused absolute frame path
    assert not at.exception
    assert any(f"{HUGE + 10:,} characters" in w.value for w in at.warning)
    shown = max(len(c.value) for c in at.code)
    assert shown <= vs.TEXT_LIMIT
    pages = at.number_input(key="page_ep_2_text")
    pages.set_value(pages.max).run()
    assert any(c.value.endswith("END-OF-HUGE") for c in at.code)

    at.button(key="step_next").click().run()  # symlink to a file outside the run
    assert not at.exception and images(at) == []
    at.button(key="step_next").click().run()  # a good frame inside the run still shows
    assert images(at) == ["Frame at step 4"]
    assert not any(SECRET in v for v in everything(at))

    at.query_params.update(view="table")
    at.radio(key="view").set_value("Episodes").run()
    assert not at.exception and len(at.dataframe[0].value) == 1  # the torn line is skipped


def test_safe_image_refuses_paths_outside(hostile_run):
    assert vs.safe_image(hostile_run, "../outside/secret.png") is None
    assert vs.safe_image(hostile_run, str((hostile_run.parent / "outside" / "secret.png").resolve())) is None
    assert vs.safe_image(hostile_run, "frames/link.png") is None
    assert vs.safe_image(hostile_run, "/etc/passwd") is None
    assert vs.safe_image(hostile_run, None) is None and vs.safe_image(hostile_run, {"x": 1}) is None


def test_hostile_run_in_a_real_browser(browser, served):
    page = browser.new_page()
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    bodies: list[bytes] = []
    page.on("response", lambda r: bodies.append(r.body()) if "/media/" in r.url else None)
    page.goto(f"{served}/?view=episode&run=hostile&episode=evil&step=1")
    page.get_by_text("Step 1 of 4").wait_for(timeout=30_000)
    page.get_by_text("<script>window.__pwned = 1</script>", exact=False).first.wait_for()
    assert page.evaluate("window.__pwned") is None
    page.get_by_role("button", name="Next ▶").click()
    page.get_by_text("Step 2 of 4").wait_for(timeout=30_000)
    page.get_by_text("Long field").wait_for()
    page.get_by_role("button", name="Next ▶").click()
    page.get_by_text("Step 3 of 4").wait_for(timeout=30_000)
    page.wait_for_timeout(300)
    assert page.evaluate("window.__pwned") is None
    assert not any(u.startswith("http://127.0.0.1:9/") for u in requests)
    assert not any(SECRET.encode() in b for b in bodies)
    assert SECRET not in page.content()
    page.close()
