"""Sessions spread over an embedded env's servers by task: a task's episodes go to one server (which keeps
what it worked out of the task), unless that server is far busier than another."""

import pytest

from evalkit.envs.client.openenv import SPREAD_SLACK, Endpoint, Spread
from evalkit.envs.client.sessions import open_session, spread_key
from evalkit.envs.embedded.server import serve

URLS = ("ws://a", "ws://b")


def test_a_task_keeps_to_one_server_and_tasks_share_them():
    spread = Spread()
    first = spread.pick(URLS, "task-1")
    assert [spread.pick(URLS, "task-1") for _ in range(3)] == [first] * 3
    keys = [f"task-{i}" for i in range(40)]
    assert {spread.pick(URLS, k) for k in keys} == set(URLS)  # both serve some tasks
    for url in URLS:  # every session left: none counted
        for _ in range(spread.open(url)):
            spread.leave(url)
    assert spread.open(URLS[0]) == spread.open(URLS[1]) == 0


def test_a_busy_server_gives_way_and_sessions_of_no_task_take_turns():
    spread = Spread()
    busy = spread.pick(URLS, "hot")
    for _ in range(SPREAD_SLACK):
        assert spread.pick(URLS, "hot") == busy
    other = next(u for u in URLS if u != busy)
    assert spread.pick(URLS, "hot") == other  # SLACK + 1 more than the other: the next goes there
    spread.leave(busy)
    spread.leave(busy)
    assert spread.pick(URLS, "hot") == busy  # evened out again
    turns = [spread.pick(URLS, None) for _ in range(4)]
    assert turns[0] != turns[1] and turns[:2] == turns[2:]


def test_reset_keys_leave_out_what_differs_between_a_tasks_episodes():
    one = {"split": "test", "index": 3, "surface": "tools", "seed": 1}
    assert spread_key(one) == spread_key({**one, "seed": 2, "episode_id": "x"})
    assert spread_key(one) != spread_key({**one, "index": 4})


@pytest.fixture(scope="module")
def two_servers():
    with serve("canvas", max_concurrent_envs=8) as a, serve("canvas", max_concurrent_envs=8) as b:
        yield Endpoint(a.base_url, "canvas", None, (b.base_url,))


def test_a_tasks_sessions_open_on_one_of_the_envs_servers(two_servers):
    """Two models' episodes of one task, one after the other, reach the same server (in turn, the old way,
    they reached both, and each worked the task's target out); other tasks reach the other too."""
    reset = {"split": "test", "index": 7, "surface": "tools", "mode": "reference"}
    sessions = [open_session(two_servers, reset)[0] for _ in range(2)]
    try:
        assert sessions[0].base_url == sessions[1].base_url
        others = [open_session(two_servers, {**reset, "index": i})[0] for i in range(8, 16)]
        try:
            assert {s.base_url for s in others} == {two_servers.base_url, *two_servers.mirrors}
        finally:
            for s in others:
                s.close()
    finally:
        for s in sessions:
            s.close()
