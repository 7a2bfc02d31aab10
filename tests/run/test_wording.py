"""What the loop tells the model comes from what the env offers: finishing tool, instructions, task text."""

from __future__ import annotations

import pytest

from evalkit.run import rules, wording
from evalkit.types import Image, ToolSpec

PNG = Image(b"\x89PNG\r\n\x1a\nfake", "image/png")
TAIL = "You have {} turns; each turn may call several tools."
NEEDS_TEXT = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
PNG_B64 = (
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGD4DwABBAEAwS2OUAAAAABJ"
    "RU5ErkJggg=="
)
"""A real one-pixel PNG, as a data URL."""


def tools(*names: str) -> list[ToolSpec]:
    return [ToolSpec(n) for n in names]


@pytest.mark.parametrize(
    "names, finish",
    [
        (("get_document", "add_element", "submit"), "submit"),
        (("lookup", "submit_answer"), "submit_answer"),
        (("search", "final_answer"), "final_answer"),
        (("check_plan", "submit_plan"), "submit_plan"),
        (("click", "markDone"), "markDone"),
        (("finish_task", "submit"), "submit"),  # an exact word beats a prefix
        (("answer", "done"), "answer"),
        (("echo_message",), None),
        (("get_answer_format", "abandoned", "resubmit"), None),  # the word must open or close the name
        (("step",), None),
    ],
)
def test_finishing_tool_by_name(names, finish):
    found = rules.finishing_tool(tools(*names))
    assert (found.name if found else None) == finish


def test_a_tool_the_env_marks_wins_over_names():
    marked = ToolSpec("grade_me", finishes=True)
    assert rules.finishing_tool([ToolSpec("submit"), marked]) is marked


def test_auto_submit_only_when_a_call_without_arguments_means_something():
    assert rules.can_auto_submit(ToolSpec("submit"))
    assert not rules.can_auto_submit(ToolSpec("answer", parameters=NEEDS_TEXT))
    assert not rules.can_auto_submit(None)
    # `openenv import`'s Verifiers submit: every argument optional, {} would score an empty completion
    optional = {
        "type": "object",
        "properties": {"completion": {"type": "string"}, "messages": {"type": "array"}},
    }
    assert not rules.can_auto_submit(ToolSpec("submit", parameters=optional))
    said = wording.auto_submit_text(ToolSpec("submit", parameters=optional))
    assert "takes arguments (completion, messages), so it is never called for the model" in said
    # an env that says an empty call means something (the webapp's answer is optional, its grade is what
    # was done) gets it; a required argument never does
    assert rules.can_auto_submit(ToolSpec("submit", parameters=optional, auto_submit=True))
    assert not rules.can_auto_submit(ToolSpec("answer", parameters=NEEDS_TEXT, auto_submit=True))
    assert (
        wording.auto_submit_text(ToolSpec("submit"))
        == "submit; called for the model as submit({}) if it never does"
    )


def test_a_chat_prompts_system_role_is_the_system_prompt_beside_the_instructions():
    prompt = [{"role": "system", "content": "Answer in one word."}, {"role": "user", "content": "Capital?"}]
    assert wording.system_prompt({"prompt": prompt}, tools("submit")) == "Answer in one word."
    both = wording.system_prompt({"prompt": prompt, "instructions": "Be brief."}, tools("submit"))
    assert both == "Be brief.\n\nAnswer in one word."
    assert wording.system_prompt({}, tools("step"), {"prompt": prompt}) == "Answer in one word."
    opening = wording.opening({"prompt": prompt}, {}, 5)
    assert opening.text.startswith("Capital?\nYou have 5 turns") and "Answer in one word" not in opening.text


def test_what_is_withheld_is_in_no_opening_neither_text_nor_picture():
    class Session:
        observation = {"board": "..x", "solution": "x.."}
        withheld = {"task_spec": "the evaluator's"}

    meta = {"goal": "Win.", "task_spec": {"answer": "x..", "pic": PNG_B64}, "source_type": "ors"}
    op = wording.session_opening(Session(), meta, 3, None, hide=("solution",))
    assert "x.." not in op.text and "ors" not in op.text and op.images == []
    assert op.text.startswith("Win.\nWhat you observe:\nboard: ..x")
    shown, fields = wording.seen(Session(), meta, ("solution",))
    assert shown == {"goal": "Win."} and fields == {"board": "..x"}


def test_system_prompt_is_the_envs_instructions_else_names_the_tools():
    assert wording.system_prompt({"instructions": "Be brief."}, tools("a")) == "Be brief."
    generic = wording.system_prompt({}, tools("look", "answer"))
    assert "look, answer" in generic and generic.endswith("When you are done, call answer.")
    assert "final answer in text" in wording.system_prompt({}, tools("echo_message"))
    kept = wording.system_prompt({"answer_ends_episode": False}, tools("echo_message"))
    assert "answer in text" not in kept and kept.endswith("until the environment ends the task.")


def test_a_text_answer_ends_only_where_no_finishing_tool_is_and_the_env_allows_it():
    assert rules.answer_ends(None, {}) and rules.answer_ends(None, {"answer_ends_episode": True})
    assert not rules.answer_ends(None, {"answer_ends_episode": False})
    assert not rules.answer_ends(ToolSpec("submit"), {}) and not rules.answer_ends("submit", {})


def test_nudges_and_turn_notes_name_the_finishing_tool_or_ask_for_text():
    assert wording.nudge("submit") == (
        "You did not call a tool. Continue the task by calling one of your tools; "
        "when you are done, call submit."
    )
    # without a finishing tool a nudge is given only where text is not the answer: it asks for tools
    assert wording.nudge(None) == "You did not call a tool. Continue the task by calling one of your tools."
    assert wording.turns_left_note(1, "answer").endswith("finish and call answer in it]")
    assert (
        wording.turns_left_note(1, None)
        == "\n[1 turn left: your next turn is the last — finish the task in it]"
    )
    assert wording.turns_left_note(4, None) == "\n[4 turns left]" and wording.turns_left_note(0, "x") == (
        "\n[no turns left]"
    )


def test_opening_from_metadata_prompt_with_its_pictures_first():
    meta = {"prompt": "Recreate it.", "reference_jpeg_b64": PNG.b64, "instructions": "..."}
    op = wording.opening(meta, {"screen": f"data:image/png;base64,{PNG.b64}"}, 5)
    # the observation's picture is the message's second: the metadata's come first
    # the metadata's picture is named among what the model observes, by its number
    assert op.text == (
        f"Recreate it.\nWhat you observe:\nscreen: [image 2]\nreference_jpeg_b64: [image 1]\n{TAIL.format(5)}"
    )
    assert op.attached == [PNG] and op.observed == [PNG] and op.images == [PNG, PNG]


def test_the_loops_screenshot_goes_between_and_is_named():
    shot = Image(b"\x89PNG\r\n\x1a\nshot", "image/png")
    meta = {"prompt": "Recreate it.", "reference_jpeg_b64": PNG.b64}
    op = wording.opening(meta, {"board": f"data:image/png;base64,{PNG.b64}"}, 5, [shot])
    assert op.images == [PNG, shot, PNG] and op.screen == [shot]
    assert op.text == (
        "Recreate it.\nWhat you observe:\nboard: [image 3]\nreference_jpeg_b64: [image 1]\n"
        f"{TAIL.format(5)}\nImage 2 is a screenshot of the screen as it is now."
    )
    alone = wording.opening({"prompt": "Buy it."}, {}, 5, [shot])
    assert alone.images == [shot] and alone.text.endswith(
        "\nThe attached image is a screenshot of the screen as it is now."
    )
    assert "screenshot" not in wording.opening(meta, {}, 5).text


@pytest.mark.parametrize("key", ["question", "task", "goal"])
def test_opening_takes_the_task_text_from_metadata_or_fields(key):
    assert wording.opening({key: " What now? "}, {}, 3).text.startswith("What now?\nYou have 3 turns")
    op = wording.opening({}, {key: "Find the exit.", "position": [1, 2]}, 3)
    assert op.text == f"Find the exit.\nWhat you observe:\nposition: [1, 2]\n{TAIL.format(3)}"


def test_opening_without_any_task_text():
    assert wording.opening({"instructions": "x"}, {}, 2).text.startswith("Begin the task described in your")
    assert wording.opening({}, {}, 2).text.startswith("Begin: use your tools")
    op = wording.opening({}, {"board": [[0, 1], [1, 0]], "legal_actions": [0, 1]}, 2)
    assert op.text.startswith("The environment's first observation:\nboard:\n0 1\n1 0\nlegal_actions: [0, 1]")
    assert op.images == []


def test_a_python_session_without_an_observation_shows_its_target():
    class Plain:  # an in-process EnvSession: its target() is how it says what the task asks for
        pass

    class Wire:  # an OpenEnv session: what its reset observation carries is what the model sees
        observation: dict = {}

    op = wording.session_opening(Plain(), {"prompt": "Match it."}, 4, PNG)
    assert op.images == [PNG] and op.text.startswith("Match it.")
    assert wording.session_opening(Wire(), {"prompt": "Describe it."}, 4, PNG).images == []
    again = wording.session_opening(Plain(), {"reference_b64": PNG.b64}, 4, PNG)
    assert again.images == [PNG]  # carried by the metadata already: not twice
