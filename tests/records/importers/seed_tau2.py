"""τ²-bench results as τ² writes them (`tau2.data_model.simulation.Results.save`, its SimulationRun,
Message and RewardInfo models): a results JSON with `info`, `tasks` and `simulations`; the same simulations
as a bare list (some leaderboard submissions hold them so); τ²'s directory format; and a leaderboard
submission folder.

Three airline tasks run twice: task 0 passes both trials (the second with parallel tool calls, a
MultiToolMessage), task 1 fails once and passes once (a tool error in the failure), task 2 hits the step
limit once (τ² scores it 0) and dies of an infrastructure error once (no reward_info). Costs are the agent's;
the user simulator's are apart."""

from __future__ import annotations

import copy
import json
from pathlib import Path

POLICY = "# Airline agent policy\nThe time is 2024-05-15 15:00:00 EST.\nNever cancel a basic economy flight."
AGENT_LLM, USER_LLM = "gpt-4.1-mini", "gpt-4.1"


def _info(agent_llm: str = AGENT_LLM, domain: str = "airline") -> dict:
    return {
        "git_commit": "a2c0247",
        "num_trials": 2,
        "max_steps": 30,
        "max_errors": 10,
        "user_info": {"implementation": "user_simulator", "llm": USER_LLM, "llm_args": {"temperature": 0.0},
                      "global_simulation_guidelines": "You are a customer."},
        "agent_info": {"implementation": "llm_agent", "llm": agent_llm, "llm_args": {"temperature": 0.0}},
        "environment_info": {"domain_name": domain, "policy": POLICY, "tool_defs": None},
        "seed": 300,
        "text_streaming_config": None,
    }  # fmt: skip


def _task(tid: str) -> dict:
    return {
        "id": tid,
        "description": {"purpose": f"task {tid}"},
        "user_scenario": {"persona": None, "instructions": {"domain": "airline", "reason_for_call": "cancel",
                                                           "known_info": "user id mia_li_3668",
                                                           "task_instructions": "Be polite."}},
        "evaluation_criteria": {"actions": [], "communicate_info": [], "nl_assertions": None},
    }  # fmt: skip


def _assistant(content: str | None, calls: list | None = None, cost: float = 0.002, model: str = AGENT_LLM,
               reasoning: str | None = None) -> dict:  # fmt: skip
    finish = "tool_calls" if calls else "stop"
    message = {"role": "assistant", "content": content}
    if reasoning:
        message["reasoning_content"] = reasoning
    return {
        "role": "assistant", "content": content, "tool_calls": calls, "is_audio": False, "turn_idx": None,
        "timestamp": "2025-06-01T10:00:01", "cost": cost,
        "usage": {"completion_tokens": 20, "prompt_tokens": 900},
        "raw_data": {"model": model, "choices": [{"finish_reason": finish, "message": message}]},
        "generation_time_seconds": 1.5,
    }  # fmt: skip


def _call(cid: str, name: str, **args) -> dict:
    return {"id": cid, "name": name, "arguments": args, "requestor": "assistant"}


def _tool(cid: str, content: str, error: bool = False, requestor: str = "assistant") -> dict:
    return {"id": cid, "role": "tool", "content": content, "requestor": requestor, "error": error,
            "turn_idx": None, "timestamp": "2025-06-01T10:00:02"}  # fmt: skip


def _user(content: str | None, calls: list | None = None) -> dict:
    return {"role": "user", "content": content, "tool_calls": calls, "is_audio": False, "turn_idx": None,
            "timestamp": "2025-06-01T10:00:00", "cost": 0.001, "usage": None, "raw_data": None}  # fmt: skip


GREETING = {"role": "assistant", "content": "Hi! How can I help you today?", "tool_calls": None,
            "is_audio": False, "cost": 0.0, "usage": None, "raw_data": None}  # fmt: skip


def _reward(reward: float, db: float, note: str | None = None) -> dict:
    return {
        "reward": reward,
        "db_check": {"db_match": db == 1.0, "db_reward": db},
        "env_assertions": None,
        "action_checks": [{"action": {"action_id": "0", "requestor": "assistant",
                                      "name": "cancel_reservation", "arguments": {"reservation_id": "Z"}},
                           "action_match": db == 1.0, "action_reward": db, "tool_type": "write"}],
        "nl_assertions": None,
        "communicate_checks": [{"info": "refund", "met": True, "justification": "said"}],
        "reward_basis": ["DB", "COMMUNICATE"],
        "reward_breakdown": {"DB": db, "COMMUNICATE": 1.0},
        "info": {"note": note} if note else None,
    }  # fmt: skip


def _sim(tid: str, trial: int, reason: str, ri: dict | None, messages: list, agent_cost: float | None,
         **extra) -> dict:  # fmt: skip
    return {
        "id": f"sim-{tid}-{trial}", "task_id": tid, "timestamp": "2025-06-01T10:00:00",
        "start_time": "2025-06-01T10:00:00", "end_time": "2025-06-01T10:00:40", "duration": 40.0,
        "termination_reason": reason, "agent_cost": agent_cost, "user_cost": 0.004, "agent_usage": None,
        "reward_info": ri, "messages": messages, "ticks": None, "trial": trial, "seed": 300 + trial,
        "mode": "half_duplex", **extra,
    }  # fmt: skip


def simulations() -> list[dict]:
    cancel = [
        GREETING,
        _user("I want to cancel reservation ZFA04Y."),
        _assistant(None, [_call("c1", "get_reservation_details", reservation_id="ZFA04Y")],
                   reasoning="Look it up first."),
        _tool("c1", '{"reservation_id": "ZFA04Y", "cabin": "business"}'),
        _assistant("It is a business reservation. Shall I cancel it?"),
        _user("Yes please."),
        _assistant(None, [_call("c2", "cancel_reservation", reservation_id="ZFA04Y")]),
        _tool("c2", '{"status": "cancelled"}'),
        _assistant("Done: cancelled, and the refund is on its way."),
        _user("###STOP###"),
    ]  # fmt: skip
    parallel = copy.deepcopy(cancel)
    parallel[2] = _assistant(None, [_call("p1", "get_reservation_details", reservation_id="ZFA04Y"),
                                    _call("p2", "get_user_details", user_id="mia_li_3668")])  # fmt: skip
    parallel[3] = {"role": "tool", "tool_messages": [_tool("p1", '{"cabin": "business"}'),
                                                     _tool("p2", '{"name": "Mia Li"}')]}  # fmt: skip
    failed = copy.deepcopy(cancel)
    failed[7] = _tool("c2", "Error: reservation ZFA04Y cannot be cancelled", error=True)
    steps = cancel[:4] + [_assistant(None, [_call(f"s{i}", "search_direct_flight", origin="SFO")])
                          for i in range(2)]  # fmt: skip
    return [
        _sim("0", 0, "user_stop", _reward(1.0, 1.0), cancel, 0.0123),
        _sim("0", 1, "user_stop", _reward(1.0, 1.0), parallel, 0.0141),
        _sim("1", 0, "user_stop", _reward(0.0, 0.0), failed, 0.0102),
        _sim("1", 1, "agent_stop", _reward(1.0, 1.0), cancel, None),
        _sim(
            "2",
            0,
            "max_steps",
            _reward(0.0, 0.0, "Simulation terminated prematurely. Termination reason: max_steps"),
            steps,
            0.03,
        ),  # fmt: skip
        _sim(
            "2",
            1,
            "infrastructure_error",
            None,
            [],
            None,
            info={"error": "litellm.RateLimitError: 429", "error_type": "RateLimitError"},
        ),
    ]


def results(agent_llm: str = AGENT_LLM, sims: list | None = None) -> dict:
    return {
        "timestamp": "2025-06-01T09:59:00",
        "info": _info(agent_llm),
        "tasks": [_task(t) for t in ("0", "1", "2")],
        "simulations": simulations() if sims is None else sims,
    }


def write_results(path: Path, agent_llm: str = AGENT_LLM, sims: list | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results(agent_llm, sims), indent=2))  # as Results.save writes it: indented
    return path


def write_bare(path: Path) -> Path:
    """The simulations alone (no info): the model only in the agent messages' raw responses."""
    sims = simulations()
    for s in sims:
        for m in s["messages"]:
            if m.get("raw_data"):
                m["raw_data"]["model"] = "claude-x-2025"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(sims, indent=2))
    return path


def write_dir_format(root: Path) -> Path:
    """τ²'s directory format: results.json without its simulations, one file per simulation."""
    meta = results()
    sims = meta.pop("simulations")
    (root / "simulations").mkdir(parents=True)
    (root / "results.json").write_text(json.dumps(meta, indent=2))
    for s in sims:
        (root / "simulations" / f"{s['id']}.json").write_text(json.dumps(s, indent=2))
    return root


def write_submission(root: Path) -> Path:
    """A leaderboard submission folder: submission.json (its pass^k and cost per domain) and the bare
    simulations under trajectories/, named as τ²'s files are."""
    name = "claude-x_airline_default_gpt-4.1_2trials.json"
    write_bare(root / "trajectories" / name)
    sub = {
        "model_name": "Claude-X", "model_organization": "Example", "submission_date": "2025-06-02",
        "trajectory_files": {"airline": name},
        "results": {"airline": {"pass_1": 58.3, "pass_2": 50.0, "cost": 0.0133}},
    }  # fmt: skip
    (root / "submission.json").write_text(json.dumps(sub, indent=2))
    return root


def telecom_sims() -> list[dict]:
    """Telecom: the user simulator calls tools on their own phone; the agent does not see those."""
    msgs = [
        GREETING,
        _user(None, [{"id": "u1", "name": "check_status_bar", "arguments": {}, "requestor": "user"}]),
        _tool("u1", "No signal", requestor="user"),
        _user("My phone has no signal."),
        _assistant("Please toggle airplane mode off."),
        _user(None, [{"id": "u2", "name": "toggle_airplane_mode", "arguments": {}, "requestor": "user"}]),
        _tool("u2", "Airplane mode: OFF", requestor="user"),
        _user("Done, it works now. ###STOP###"),
    ]  # fmt: skip
    return [_sim("[mobile_data_issue]airplane_mode_on", 0, "user_stop", _reward(1.0, 1.0), msgs, 0.001)]
