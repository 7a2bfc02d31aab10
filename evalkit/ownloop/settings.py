"""What an own-loop run is asked, each setting declared once (`evalkit.values.knobs`): `evalkit ownloop`'s
flags, the run.json and resume's comparison come from the declarations, as a batch's do from
`evalkit.run.settings`. The settings that change what an episode is (`outcome`) are what a resume may not
change and what summaries keep runs apart by."""

from __future__ import annotations

from dataclasses import MISSING, dataclass
from typing import Any

from evalkit.errors import ConfigError
from evalkit.values import checks, knobs
from evalkit.values.knobs import knob

_NONNEG = checks.Number(float, 0)


def _endpoint(name: str, v: Any) -> str | None:
    """An OpenAI-compatible server's URL, or `fake` (a scripted model served for the run)."""
    return v if v in (None, "fake") else checks.url(name, v, ("http", "https"))


def _ports(name: str, v: Any) -> list[int] | None:
    """Port numbers: a list, or a comma-separated string of them."""
    listed = checks.names(name, v) if isinstance(v, str) else v
    if listed is None:
        return None
    ports = []
    for p in listed:
        text = str(p)
        if isinstance(p, bool) or not text.isdigit() or not 0 < int(text) < 65536:
            raise ConfigError(f"{name} wants port numbers, got {p!r}")
        ports.append(int(text))
    return ports or None


def _path(name: str, v: Any) -> list[str]:
    """Directories: a list, or a colon-separated string of them."""
    return [p for p in v.split(":") if p] if isinstance(v, str) else list(v or [])


def _viewport(help: str) -> Any:
    """A side of the viewport: 0 is the agent's released one (so 0 is allowed here, not from the flag)."""
    return knob(0, help, checks.COUNT, outcome=True, parse=checks.WHOLE.parse)


@dataclass
class Settings:
    """What an own-loop run is asked; the released defaults of each runner apply where 0 / None. Each field is
    a knob (`evalkit.values.knobs`): `evalkit ownloop`'s flags, the run.json and resume's comparison come
    from the declarations."""

    agent: str = knob(MISSING, "uitars, opencua, fara7b, molmoweb, or the baselines dom, random", flag=None)
    model: str | None = knob(None, "the served model name")
    endpoint: str | None = knob(
        None,
        "OpenAI-compatible model server, e.g. http://127.0.0.1:8000/v1; or `fake`: a scripted model "
        "answering in the agent's own format, served for the run (no GPU)",
        _endpoint,
    )
    path: list[str] = knob(
        list, "colon list put first on sys.path for released agent code (default $OWNLOOP_PATH)", _path
    )
    task_ids: list[str] | None = knob(None, "only these task ids", checks.names)
    limit: int | None = knob(None, "the first N tasks", checks.WHOLE)
    workers: int = knob(2, "tasks at once", checks.WHOLE)
    servers: int = knob(2, "web-app servers to spread workers over", checks.WHOLE)
    ports: list[int] | None = knob(None, "start the web-app servers on these ports instead", _ports)
    max_steps: int = knob(40, "model calls per task", checks.WHOLE, outcome=True)
    timeout: float = knob(1800.0, "wall-clock seconds per task", checks.POSITIVE, outcome=True)
    width: int = _viewport("viewport (default: the agent's released one)")
    height: int = _viewport("viewport height (default: the agent's released one)")
    wait_s: float = knob(
        5.0, "UI-TARS wait() and OpenCUA's pause after actions", _NONNEG, flag="--wait", metavar="WAIT"
    )
    settle_s: float = knob(
        1.0, "seconds for a page to settle after each step", _NONNEG, flag="--settle", metavar="SETTLE"
    )
    retry_wait: float = knob(5.0, "seconds before a model request is sent again", _NONNEG, flag=None)
    frequency_penalty: float = knob(
        0.0, "uitars (OSWorld sends 1)", checks.Number(float, -2, high=2), outcome=True
    )
    temperature: float | None = knob(None, "molmoweb sampling (released: 0.7)", _NONNEG, outcome=True)
    top_p: float | None = knob(
        None, "molmoweb sampling (released: 0.8)", checks.Number(float, 0, strict=True, high=1), outcome=True
    )
    max_past_steps: int = knob(10, "molmoweb text history", checks.WHOLE, outcome=True)
    opencua_max_tokens: int = knob(2048, "opencua: output tokens per model call", checks.WHOLE, outcome=True)
    fara_retries: int = knob(
        5,
        "fara7b: reruns of a task that raised",
        checks.COUNT,
        outcome=True,
        flag="--fara7b-error-retries",
        metavar="FARA7B_ERROR_RETRIES",
    )
    request_timeout: float = knob(300.0, "seconds one model request may take", checks.POSITIVE)
    seed: int = knob(0, "random baseline", checks.Number(int))
    argv: list[str] | None = knob(None, "the command line that made the run", flag=None)

    def __post_init__(self) -> None:
        knobs.check_all(self)

    @classmethod
    def make(cls, settings: Settings | None = None, who: str = "run_ownloop()", **kw: Any) -> Settings:
        """`settings` with keyword overrides (without `settings`, the overrides name the agent)."""
        return knobs.make(cls, settings, who, **kw)

    @classmethod
    def add_flags(cls, parser: Any) -> None:
        """One flag per knob, from its declaration."""
        knobs.add_flags(cls, parser)

    @classmethod
    def from_flags(cls, a: Any, **kw: Any) -> Settings:
        return knobs.from_flags(cls, a, **kw)

    def outcome(self) -> dict[str, Any]:
        """The knobs that change what an episode is: what a resume compares, beside the agent and model."""
        return knobs.outcome(self)
