"""A hostile run directory: traversal, absolute and symlinked paths, script in model text, 10 MB fields in the
turn text, grade, usage, model, task id, tool arguments and tool result. The viewer stays up, refuses every
file outside the run, renders trace text as text, and sends no element of more than a page to the browser,
while the whole of every long field stays reachable a page at a time."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from evalkit.view import support as vs
from tests.viewer.viewer_runs import APP, HUGE, SECRET, rows

ELEMENT_BYTES = 3 * vs.TEXT_LIMIT
"""The most one element may weigh on the wire: a page of text plus its frame."""


def everything(at: AppTest) -> list[str]:
    out = []
    for kind in ("text", "caption", "code", "markdown", "warning", "error", "info", "subheader"):
        out += [str(e.value) for e in getattr(at, kind)]
    out += [str(m.value) for m in at.metric] + [str(d.value) for d in at.dataframe]
    return out


def images(at: AppTest) -> list[str]:
    """Captions of the captioned images (the filmstrip's thumbnails have none)."""
    return [c for img in at.image for c in img.captions if c]


def thumbnails(at: AppTest) -> int:
    return sum(1 for img in at.image if not any(img.captions))


def _walk(node):
    yield node
    for child in getattr(node, "children", {}).values():
        yield from _walk(child)


def assert_small(at: AppTest) -> None:
    """Every element the browser would receive is at most a page, and every table cell is clipped."""
    assert not at.exception, at.exception
    sizes = [
        (n.proto.ByteSize(), n.type)
        for n in _walk(at._tree)
        if hasattr(getattr(n, "proto", None), "ByteSize")
    ]
    assert sizes and max(sizes)[0] <= ELEMENT_BYTES, max(sizes)
    for d in at.dataframe:  # text and categorical columns alike
        for col in d.value.columns:
            longest = max((len(v) for v in d.value[col].astype(object) if isinstance(v, str)), default=0)
            assert longest <= vs.CELL_LIMIT, col


def last_page(at: AppTest, key: str, end: str) -> bool:
    """Go to the last page of the long field `key`: does it end with `end`?"""
    pages = at.number_input(key=f"page_{key}")
    pages.set_value(pages.max).run()
    assert_small(at)
    return any(c.value.rstrip('"\n}').endswith(end) for c in at.code)


def test_hostile_run_stays_up_and_leaks_nothing(monkeypatch, hostile_run, synth_run):
    monkeypatch.setenv("EVALKIT_RUNS", f"{hostile_run}:{synth_run}")
    at = AppTest.from_file(str(APP), default_timeout=60)
    at.query_params.update(view="episode", run="hostile", episode="evil", step="1")
    at.run()
    assert_small(at)
    assert any(
        "<script>window.__pwned = 1</script>" in v for v in (e.value for e in at.text)
    )  # shown as text
    for md in at.markdown:  # nothing from the trace reaches Markdown unescaped
        assert "<script" not in md.value and "](http" not in md.value and "<b>" not in md.value
    assert images(at) == []  # frame, target and final render all point outside the run
    assert thumbnails(at) == 1  # of five steps' frames, only the last is inside the run
    assert sum("missing or outside the run" in c.value for c in at.caption) >= 3
    header = at.text[0].value  # model and task id cut with an ellipsis
    assert header.startswith("<script>alert(1)</script>mmm") and "…" in header and len(header) < 1000
    assert "../../etc/passwd" in header and "END-OF" not in header
    # Grade and usage values are cut in their tables and shown whole a page at a time below (and a 10 MB tool
    # result in the transcript under the step, a page at a time too).
    assert sum(f"{HUGE:,} characters" in w.value for w in at.warning) == 3
    sid = vs.short_id("evil")
    assert last_page(at, f"grade0_{sid}", "END-OF-GRADE")
    assert last_page(at, f"usage0_{sid}", "END-OF-USAGE")

    at.button(key="step_next").click().run()  # the 10 MB turn, refused absolute frame path
    assert_small(at)
    assert any(f"{HUGE + 10:,} characters" in w.value for w in at.warning)
    assert last_page(at, "ep_2_text", "END-OF-HUGE")

    at.button(key="step_next").click().run()  # symlink to a file outside the run; 10 MB tool args and result
    assert_small(at)
    assert images(at) == []
    assert last_page(at, "ep_3_c0_args", "END-OF-ARGS")
    assert last_page(at, "ep_3_c0_res", "END-OF-RESULT")
    at.button(key="step_next").click().run()  # a good frame inside the run still shows
    assert images(at) == ["After step 4"]
    assert not any(SECRET in v for v in everything(at))

    at.slider(key="step").set_value(1).run()  # the conversation below: the same text, the same refusals
    assert_small(at)
    for md in at.markdown:
        assert "<script" not in md.value and "](http" not in md.value and "<b>" not in md.value
    assert images(at) == [] and not any(SECRET in v for v in everything(at))
    assert sum("<script>window.__pwned = 1</script>" in t.value for t in at.text) >= 2  # step and transcript

    at.radio(key="view").set_value("Episodes").run()
    at.text_input(key="f_search").set_value("window").run()  # snippets of hostile text, in cells
    assert_small(at)
    assert any("<script>window.__pwned" in s for s in rows(at, "steps_table")["snippet"])
    at.text_input(key="f_search").set_value("").run()

    at.radio(key="view").set_value("Episodes").run()  # the 10 MB model and task id in cells and filters
    assert_small(at)
    assert len(rows(at)) == 9  # the synthetic run's 8 and the hostile 1; the torn line skipped
    assert any(o.startswith("<script>") and o.endswith("…") for o in at.multiselect(key="f_model").options)

    at.radio(key="view").set_value("A vs B").run()
    side = next(s for s in at.selectbox(key="ab_a").options if s.startswith("<script>"))
    assert side.endswith("…")
    full = vs.sides(vs.with_labels(vs.episode_table(hostile_run), {str(hostile_run): "hostile"}))[0]
    at.selectbox(key="ab_a").set_value(full).run()
    at.selectbox(key="ab_b").set_value(full).run()  # the episode against itself: its pair row and headers
    assert_small(at)
    assert sum("reward" in m.value for m in at.markdown) == 2  # both sides' headers

    at.radio(key="view").set_value("Why").run()  # the 10 MB model's rates, its evidence, a scanner's list
    assert_small(at)
    for md in at.markdown:
        assert "<script" not in md.value and "](http" not in md.value and "<b>" not in md.value

    at.radio(key="view").set_value("Summary").run()  # tables and charts grouped by the 10 MB model
    assert_small(at)
    assert len(at.get("vega_lite_chart")) >= 1


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
    page.get_by_text(f"Long field: {HUGE + 10:,} characters").first.wait_for()  # the step and the transcript
    page.get_by_role("button", name="Next ▶").click()
    page.get_by_text("Step 3 of 4").wait_for(timeout=30_000)
    page.wait_for_timeout(300)
    assert page.evaluate("window.__pwned") is None
    assert not any(u.startswith("http://127.0.0.1:9/") for u in requests)
    assert not any(SECRET.encode() in b for b in bodies)
    content = page.content()
    assert SECRET not in content
    assert len(content) < 2_000_000  # seven 10 MB fields in the trace, none of them whole on the page
    page.close()
