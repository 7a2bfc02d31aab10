"""Env instances handed from a closed session to the next one."""

from __future__ import annotations

import threading
import time

from evalkit.envs.client.openenv import OpenEnvSession
from evalkit.envs.embedded.recycle import recycling


class Built:
    made = 0

    def __init__(self):
        Built.made += 1


def test_a_closed_instance_goes_to_the_next_session_and_is_kept_once():
    make = recycling(Built, keep=2)
    a, b = make(), make()
    assert a is not b and Built.made == 2
    a.recycle()
    a.recycle()  # closed twice: kept once
    assert make() is a and make() is not a and Built.made == 3
    c, d, e = make(), make(), make()
    for env in (c, d, e):
        env.recycle()
    assert {id(make()), id(make())} <= {id(c), id(d), id(e)}  # at most `keep` are kept
    assert make.__name__ == "Built"


def test_instances_stocked_ahead_go_to_the_first_sessions():
    make = recycling(Built, keep=4)
    before = Built.made
    make.stock(3)
    make.stock(3)  # as many are kept already: none more
    assert Built.made == before + 3
    first = [make() for _ in range(4)]
    assert Built.made == before + 4  # three from the stock, then one made
    make.stock(9)  # no more than `keep`
    assert Built.made == before + 8 and all(type(e) is Built for e in first)


def test_a_warmed_canvas_app_has_its_first_sessions_envs_made_beforehand(monkeypatch):
    from evalkit.envs.embedded.canvas.app import STOCK, build_app, warm
    from evalkit.envs.embedded.canvas.env import CanvasEnv

    made, real = [], CanvasEnv.__init__

    def counted(self) -> None:
        made.append(self)
        real(self)

    monkeypatch.setattr(CanvasEnv, "__init__", counted)
    app = build_app()
    warm(app)
    assert len(made) == STOCK
    sessions = [app.state.env_factory() for _ in range(STOCK)]
    assert len(made) == STOCK and {id(e) for e in sessions} == {id(e) for e in made}


def test_the_factory_is_a_class_for_one_executor_thread():
    """OpenEnv reads a class factory's flags: every session's env is then made and closed on one thread it
    keeps, not on a new thread per session."""
    import inspect

    make = recycling(Built)
    assert inspect.isclass(make) and make.REQUIRES_SINGLE_THREAD_EXECUTOR
    assert type(make()) is Built  # never an instance of the factory itself


def test_a_served_canvas_makes_and_closes_its_envs_on_one_thread(canvas_server, monkeypatch):
    from evalkit.envs.embedded.canvas.env import CanvasEnv

    threads, real = [], CanvasEnv.close

    def close(self):
        threads.append(threading.get_ident())
        real(self)

    monkeypatch.setattr(CanvasEnv, "close", close)

    def episode(i: int) -> None:
        with OpenEnvSession(canvas_server.base_url) as s:
            s.reset(task_id=f"canvas-test-000{i}")

    runs = [threading.Thread(target=episode, args=(i,)) for i in range(1, 5)]
    for t in runs:
        t.start()
    for t in runs:
        t.join()
    deadline = time.monotonic() + 5
    while len(threads) < 4 and time.monotonic() < deadline:  # a close may follow its hang-up
        time.sleep(0.02)
    assert len(threads) == 4 and len(set(threads)) == 1


def test_a_recycled_canvas_session_starts_clean(canvas_server):
    rect = {"kind": "rect", "x": 10, "y": 10, "width": 50, "height": 40, "fill": "#ff0000"}
    for task in ("canvas-test-0001", "canvas-test-0002", "canvas-test-0001"):
        with OpenEnvSession(canvas_server.base_url) as s:
            meta = s.reset(task_id=task)
            assert meta["task_id"] == task
            assert s.document()["elements"] == []  # nothing left over from the session before
            assert not s.call("add_element", rect).is_error
            assert len(s.document()["elements"]) == 1


def test_recycle_says_whether_the_instance_was_kept():
    make = recycling(Built, keep=1)
    a, b = make(), make()
    assert a.recycle() is True
    assert b.recycle() is False  # `keep` reached: the caller tears b down
    assert make() is a
