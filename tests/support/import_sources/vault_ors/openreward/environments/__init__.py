"""Stands in for `openreward.environments`: what `openenv import`'s OpenReward wrapper calls of an
environment class, with the SDK's field names — blocks (`TextBlock`, `ImageBlock`), a tool's `ToolOutput`
(`blocks`, `metadata`, `reward`, `finished`), `RunToolOutput` whose `root` is a success (`ok`, `output`) or an
error (`ok`, `error`), `list_tools()` of `ToolSpec`s (`name`, `description`, `input_schema`), and class-level
`list_splits` / `list_tasks` / `num_tasks` / `get_task` / `get_task_range`. A tool is a method marked by
`tool` that takes nothing or one pydantic model and returns a `ToolOutput`."""

from __future__ import annotations

import inspect
from typing import Any, Literal, get_type_hints

from pydantic import BaseModel, Field, RootModel, ValidationError


class TextBlock(BaseModel, extra="forbid"):
    text: str
    detail: dict | None = None
    type: Literal["text"] = "text"


class ImageBlock(BaseModel, extra="forbid"):
    data: str
    mimeType: str
    detail: dict | None = None
    type: Literal["image"] = "image"


class ToolOutput(BaseModel, extra="forbid"):
    blocks: list[TextBlock | ImageBlock]
    metadata: dict | None = None
    reward: float | None = None
    finished: bool = False


class RunToolSuccess(BaseModel, extra="forbid"):
    ok: Literal[True] = True
    output: ToolOutput


class RunToolError(BaseModel, extra="forbid"):
    ok: Literal[False] = False
    error: str


class RunToolOutput(RootModel[RunToolSuccess | RunToolError]):
    root: RunToolSuccess | RunToolError = Field(discriminator="ok")


class ToolSpec(BaseModel, extra="forbid"):
    name: str
    description: str
    input_schema: dict | None


class ListToolsOutput(BaseModel):
    tools: list[ToolSpec]


def tool(fn: Any) -> Any:
    fn._env_tool = True
    return fn


def _model_of(fn: Any) -> type[BaseModel] | None:
    params = [p for p in inspect.signature(fn).parameters.values() if p.name != "self"]
    return get_type_hints(fn)[params[0].name] if params else None


class Environment:
    def __init__(self, task_spec: dict = {}, secrets: dict = {}) -> None:  # noqa: B006 (the SDK's defaults)
        self.task_spec = task_spec

    def setup(self) -> None:
        pass

    def teardown(self) -> None:
        pass

    @classmethod
    def num_tasks(cls, split: str) -> int:
        return len(cls.list_tasks(split))

    @classmethod
    def get_task(cls, split: str, index: int) -> dict:
        return cls.list_tasks(split)[index]

    @classmethod
    def get_task_range(cls, split: str, start: int | None = None, stop: int | None = None) -> list:
        return list(cls.list_tasks(split))[start:stop]

    @classmethod
    def list_tools(cls) -> ListToolsOutput:
        out = []
        for name, fn in inspect.getmembers(cls, callable):
            if getattr(fn, "_env_tool", False):
                model = _model_of(fn)
                schema = model.model_json_schema() if model is not None else None
                out.append(ToolSpec(name=name, description=(fn.__doc__ or "").strip(), input_schema=schema))
        return ListToolsOutput(tools=out)

    def list_task_tools(self) -> ListToolsOutput:
        return ListToolsOutput(tools=[])

    def _call_tool(self, name: str, input: dict) -> RunToolOutput:
        fn = getattr(self, name, None)
        if fn is None or not getattr(fn, "_env_tool", False):
            return RunToolOutput(RunToolError(error=f"no tool {name!r}"))
        model = _model_of(fn)
        try:
            output = fn(model.model_validate(input)) if model is not None else fn()
        except ValidationError as e:
            return RunToolOutput(RunToolError(error=str(e)))
        return RunToolOutput(RunToolSuccess(output=output))
