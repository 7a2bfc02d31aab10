"""Sequential paired comparisons: look at A − B between rounds of tasks and stop as soon as the answer is
known (A better, B better, or no difference of `delta` or more), with an error rate that stays at α however
many looks are taken.

The design (chosen by simulation, `benchmarks/sequential.py`; docs/statistics.md says why) is a
group-sequential one with O'Brien–Fleming-type alpha spending (Lan and DeMets) over a planned maximum of
tasks. At look k, with n_k of the planned N tasks paired, the share α(n_k / N) of α is spent: the critical
value c_k makes the chance under "no difference" of crossing ±c_k at any look so far equal to α(t_k),
worked out by numerical integration of the statistic's Brownian limit over the looks actually taken. The
statistic is the sign-flip test's, self-normalised: Z(δ) = Σ(dᵢ − δ) / √Σ(dᵢ − δ)² over the tasks'
differences. Each look's repeated confidence interval is every δ with |Z(δ)| < c_k; together they cover the
true difference at every look at once with probability 1 − α, so each decision read from them is wrong
with probability at most α, whenever the run stops:

  A better             the interval is above 0;
  B better             below 0;
  no difference of D   inside (−D, D) (only with a `delta`);
  undecided            the last look (the planned tasks are used up) and none of those.

The batch calls `next_look` between rounds with the paired differences so far and appends the look to
`looks.jsonl` beside the trace (`append_look`); `compare` on such a run reports the last look (`recorded`,
`compare`), never the fixed-sample p of tasks that a stopping rule chose.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import polars as pl
from scipy import optimize, special

from evalkit.analysis import stats
from evalkit.analysis.tables import MIN_TASKS
from evalkit.records.columns import eager

FORMAT_VERSION = 1
LOOKS_FILE = "looks.jsonl"
"""One JSON object per look, appended by the batch between rounds (see `Look`)."""
SPENDINGS = ("obrien-fleming", "pocock")
DECISIONS = ("a", "b", "no_difference", "continue", "undecided")
METHOD = "group-sequential sign-flip statistic, O'Brien–Fleming-type alpha spending (Lan–DeMets)"
_GRID = 201
"""Points of the numerical integration per look (Simpson's rule on ±8 SD at most): boundaries within 4e-8
of those with 801 points."""
_TOP = 8.0


@dataclass(frozen=True)
class Design:
    """What a sequential comparison is asked before its first look; a resumed run must ask the same."""

    a: str
    b: str
    max_tasks: int
    """The planned maximum of paired tasks (the evalset's tasks, or what the budget allows): α is spent over
    it, so it cannot grow once looking has begun."""
    delta: float | None = None
    """The smallest difference that matters (task-weighted mean reward): stop with "no difference of delta
    or more" when the interval lies inside (−delta, delta); None: never stop for that."""
    alpha: float = 0.05
    spending: str = "obrien-fleming"

    def __post_init__(self) -> None:
        if self.max_tasks < 1:
            raise ValueError(f"max_tasks must be at least 1, not {self.max_tasks}")
        if not 0 < self.alpha < 1:
            raise ValueError(f"alpha must be between 0 and 1, not {self.alpha}")
        if self.delta is not None and not self.delta > 0:
            raise ValueError(f"delta must be above 0, not {self.delta}")
        if self.spending not in SPENDINGS:
            raise ValueError(f"spending must be one of {', '.join(SPENDINGS)}, not {self.spending!r}")


@dataclass
class Look:
    """One look, as a line of `looks.jsonl`."""

    a: str
    b: str
    look: int
    """1, 2, … in the order taken."""
    n_tasks: int
    """Tasks paired so far (scored on both sides; every planned repeat of a task run before it counts)."""
    max_tasks: int
    fraction: float
    """The information fraction n_tasks / max_tasks (1 at the final look)."""
    final: bool
    """No tasks are left (or the budget ran out): the rest of α is spent here."""
    alpha: float
    spending: str
    delta: float | None
    alpha_spent: float
    """α(fraction): the share of α spent by this look and all before it."""
    critical: float | None
    """c_k: |Z| at or above it decides; None where nothing can be decided yet (no α left to spend here)."""
    diff: float
    """The mean of the tasks' differences A − B (not corrected for the stopping rule)."""
    sd: float
    z: float
    """The statistic at δ = 0, sign(Σd)·(|Σd| − w)⁺ / √Σd² (w: `lattice_step`); |z| ≥ critical decides."""
    ci_low: float
    ci_high: float
    """The repeated confidence interval at this look."""
    p: float | None
    """The repeated p-value: the smallest α at which this look's interval would exclude 0 (below α
    exactly when the decision is A or B better)."""
    decision: str
    """One of DECISIONS."""
    method: str = METHOD
    at: str = ""
    extra: dict = field(default_factory=dict)
    """What the batch adds (episodes and cost so far, the tasks of the round)."""
    format_version: int = FORMAT_VERSION

    def design(self) -> Design:
        return Design(self.a, self.b, self.max_tasks, self.delta, self.alpha, self.spending)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> Look:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


def spent(t: float, alpha: float, spending: str = "obrien-fleming") -> float:
    """α(t), the cumulative share of α spent at information fraction t ∈ [0, 1]."""
    t = min(max(t, 0.0), 1.0)
    if t <= 0:
        return 0.0
    if spending == "pocock":
        return alpha * math.log(1 + (math.e - 1) * t)
    z = special.ndtri(1 - alpha / 2)
    return float(2 * special.ndtr(-z / math.sqrt(t)))


def _simpson(n: int) -> np.ndarray:
    w = np.ones(n)
    w[1:-1:2], w[2:-1:2] = 4, 2
    return w / 3


def _outside(u: np.ndarray, b: float, sd: float) -> np.ndarray:
    """P(|u + N(0, sd²)| ≥ b) for each u."""
    return special.ndtr((-b - u) / sd) + special.ndtr((u - b) / sd)


def _exit(weights: np.ndarray | None, grid: np.ndarray | None, t: float, sd: float, c: float) -> float:
    """P(no earlier look stopped, and |Z| ≥ c at this one at fraction t), from the weighted density of B on
    the grid of the last look (None at the first look) and the increment's SD."""
    if weights is None:
        return float(2 * special.ndtr(-c))
    return float(weights @ _outside(grid, c * math.sqrt(t), sd))


def boundaries(fractions: Sequence[float], alpha: float, spending: str = "obrien-fleming") -> list[float]:
    """c_k for looks at the increasing information fractions given: the chance, under no difference, that
    |Z| reaches c_j at some look j ≤ k is α(t_k), for the statistic's limit (Z_k = B(t_k) / √t_k for a
    Brownian motion B). inf where a look has no α to spend. Numerical integration over the region where no
    earlier look stopped (Armitage, McPherson and Rowe's recursion)."""
    out: list[float] = []
    grid = weights = None  # B(t) at the last look on the region not stopped, and its Simpson weights
    last_t, last_spent = 0.0, 0.0
    for t in fractions:
        if not t > last_t:
            raise ValueError(f"information fractions must increase: {list(fractions)}")
        target = spent(t, alpha, spending) - last_spent
        sd = math.sqrt(t - last_t)
        c = math.inf
        if target > 1e-15 and _exit(weights, grid, t, sd, 5 * _TOP) < target:
            c = optimize.brentq(lambda c: _exit(weights, grid, t, sd, c) - target, 0.0, 5 * _TOP, xtol=1e-10)  # noqa: B023
            last_spent = spent(t, alpha, spending)  # else what this look cannot spend passes to the next
        out.append(c)
        b = min(c, _TOP) * math.sqrt(t)
        new = np.linspace(-b, b, _GRID)
        if grid is None:
            dens = np.exp(-0.5 * new**2 / t) / math.sqrt(2 * math.pi * t)
        else:
            kernel = np.exp(-0.5 * ((new[:, None] - grid[None, :]) / sd) ** 2) / (sd * math.sqrt(2 * math.pi))
            dens = kernel @ weights
        grid, weights, last_t = new, dens * _simpson(_GRID) * (new[1] - new[0]), t
    return out


def lattice_step(d: np.ndarray) -> float:
    """Half the spacing of the values Σ±dᵢ can take when the differences lie on a lattice of 1/L (L ≤ 12:
    pass/fail rewards and their repeats, or rewards of a few levels): the continuity correction of the
    statistic, without which the normal limit of a sign test on few pass/fail tasks rejects too often
    (5.4% at 50 tasks). 0 for continuous differences."""
    d = np.abs(np.asarray(d, float))
    d = d[d > 1e-12]
    if len(d) == 0:
        return 0.0
    for lattice in range(1, 13):
        k = np.rint(d * lattice)
        if np.all(np.abs(d * lattice - k) < 1e-9):
            return float(np.gcd.reduce(k.astype(np.int64))) / lattice
    return 0.0


def interval(d: np.ndarray, c: float, r: float) -> tuple[float, float, bool]:
    """(low, high, decided) of one run's differences (`intervals`)."""
    d = np.asarray(d, float)
    s, q = np.array([d.sum()]), np.array([(d * d).sum()])
    lo, hi, crossed = intervals(s, q, len(d), c, r, lattice_step(d))
    return float(lo[0]), float(hi[0]), bool(crossed[0])


def intervals(
    s: np.ndarray, q: np.ndarray, n: int, c: float, r: float | np.ndarray, w: float | np.ndarray = 0.0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Repeated intervals of many runs of n tasks at once, from each run's Σd (`s`), Σd² (`q`) and
    continuity correction `w` (`lattice_step`): every δ with (|Σ(d − δ)| − w)⁺ < c √Σ(d − δ)², within
    [−r, r], and whether δ = 0 is outside (the look decides). With V = Σd² − (Σd)²/n that is mean ±
    (w + c √(w²/n + V(1 − c²/n))) / (n − c²) (without w: mean ± c·σ̂/√(n − c²)); the whole range where
    n ≤ c² (|Z| ≤ √n: nothing can be rejected). Where a run's differences are all equal the statistic has
    no spread to invert; its interval is then the share of tasks that could differ (Clopper–Pearson for 0
    of n at the look's one-sided level) anywhere in [−r, r], on 0's far side when the look decides."""
    m = s / n
    r = np.broadcast_to(np.asarray(r, float), m.shape)
    w = np.broadcast_to(np.asarray(w, float), m.shape)
    if not math.isfinite(c):
        return -r.copy(), r.copy(), np.zeros(m.shape, bool)
    crossed = (np.abs(s) - w >= c * np.sqrt(q)) & (q > 0)
    v = np.maximum(q - s * s / n, 0.0)
    flat = v <= (1e-12 * np.maximum(1.0, np.abs(s))) ** 2
    if n > c * c:
        half = (w + c * np.sqrt(w * w / n + v * (1 - c * c / n))) / (n - c * c)
    else:
        half = np.full(m.shape, np.inf)
    lo, hi = np.maximum(-r, m - half), np.minimum(r, m + half)
    share = 1 - float(special.ndtr(-c)) ** (1 / n)
    flo, fhi = m - (m + r) * share, m + (r - m) * share
    flo = np.where(crossed & (m > 0), np.maximum(flo, 1e-12), flo)
    fhi = np.where(crossed & (m < 0), np.minimum(fhi, -1e-12), fhi)
    return np.where(flat, flo, lo), np.where(flat, fhi, hi), crossed


def _z(d: np.ndarray) -> float:
    """The look's statistic, continuity-corrected: sign(Σd)·(|Σd| − w)⁺ / √Σd²."""
    q, total = float((d * d).sum()), float(d.sum())
    return math.copysign(max(0.0, abs(total) - lattice_step(d)), total) / math.sqrt(q) if q > 0 else 0.0


def _decide(lo: float, hi: float, crossed: bool, m: float, delta: float | None, final: bool) -> str:
    if crossed:
        return "a" if m > 0 else "b"
    if delta is not None and -delta < lo and hi < delta:
        return "no_difference"
    return "undecided" if final else "continue"


def _repeated_p(fractions: list[float], z: float, alpha: float, spending: str) -> float:
    """The smallest level at which the last look's boundary is at most |z| (bisection on log α)."""
    if z == 0:
        return 1.0

    def crosses(level: float) -> bool:
        return boundaries(fractions, level, spending)[-1] <= abs(z)

    if not crosses(0.999999):
        return 1.0
    lo, hi = math.log(1e-12), math.log(0.999999)
    if crosses(1e-12):
        return 1e-12
    for _ in range(30):  # log α to 3e-8: p to 7 digits
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if crosses(math.exp(mid)) else (mid, hi)
    return math.exp(hi)


def next_look(
    d: Sequence[float], design: Design, previous: Sequence[Look] = (), final: bool = False, p: bool = True
) -> Look:
    """The look after `previous` (this design's looks so far, in order) at the per-task differences A − B
    `d` of every task paired so far: its decision, its repeated confidence interval and what `looks.jsonl`
    records. `final`: no more tasks will come (the evalset or the budget ran out), so the rest of α is spent
    here. Below MIN_TASKS tasks a look decides nothing and spends nothing. `p=False` skips the repeated
    p-value (a few hundred boundary computations)."""
    d = np.asarray(d, float)
    n = len(d)
    _follows(n, design, previous)
    fractions = [o.fraction for o in previous if o.n_tasks >= MIN_TASKS]
    t = 1.0 if final else min(1.0, n / design.max_tasks)
    final = final or t >= 1.0
    usable = n >= MIN_TASKS and (not fractions or t > fractions[-1])
    if not usable:  # too few tasks yet: no α spent, nothing decided
        t = fractions[-1] if fractions else 0.0
    c = boundaries([*fractions, t], design.alpha, design.spending)[-1] if usable else math.inf
    m = float(d.mean()) if n else 0.0
    r = max(1.0, float(np.abs(d).max())) if n else 1.0
    z = _z(d) if n else 0.0
    lo, hi, crossed = interval(d, c, r) if n else (-r, r, False)
    return Look(
        a=design.a, b=design.b, look=len(previous) + 1, n_tasks=n, max_tasks=design.max_tasks,
        fraction=t, final=final, alpha=design.alpha, spending=design.spending, delta=design.delta,
        alpha_spent=spent(t, design.alpha, design.spending), critical=c if math.isfinite(c) else None,
        diff=m, sd=float(d.std(ddof=1)) if n > 1 else 0.0, z=z, ci_low=lo, ci_high=hi,
        p=_repeated_p([*fractions, t], z, design.alpha, design.spending) if usable and p else None,
        decision=_decide(lo, hi, crossed, m, design.delta if usable else None, final),
        at=datetime.now(UTC).isoformat(timespec="seconds"),
    )  # fmt: skip


def _follows(n: int, design: Design, previous: Sequence[Look]) -> None:
    """ValueError unless a look at `n` tasks may follow `previous` under `design`."""
    for old in previous:
        if old.design() != design:
            raise ValueError(f"look {old.look} was taken under another design ({old.design()}, now {design})")
    if previous and n <= previous[-1].n_tasks:
        raise ValueError(f"a look needs more tasks than the last ({previous[-1].n_tasks}), not {n}")
    if previous and previous[-1].decision != "continue":
        raise ValueError(f"the comparison was decided at look {previous[-1].look} ({previous[-1].decision})")


def append_look(run_dir: str | Path, look: Look) -> None:
    """Add `look` to the run's `looks.jsonl`: one line, flushed and synced, so a kill leaves at most a torn
    last line (which `read_looks` skips)."""
    path = Path(run_dir) / LOOKS_FILE
    line = json.dumps(look.to_dict(), allow_nan=False) + "\n"
    with open(path, "a", encoding="utf-8") as f:
        if f.tell() and not _ends_with_newline(path):
            f.write("\n")  # after a torn line: start afresh
        f.write(line)
        f.flush()
        os.fsync(f.fileno())


def _ends_with_newline(path: Path) -> bool:
    with open(path, "rb") as f:
        f.seek(-1, os.SEEK_END)
        return f.read(1) == b"\n"


def read_looks(run_dir: str | Path, a: str | None = None, b: str | None = None) -> list[Look]:
    """The looks a run recorded (of the pair a, b when given, in either order as recorded), in order. A
    line that is not a look of this format (torn by a kill, edited, hostile) is skipped with one warning;
    never an exception."""
    path = Path(run_dir) / LOOKS_FILE
    if not path.is_file():
        return []
    looks, bad = [], 0
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            look = Look.from_dict(json.loads(line))
            _check(look)
        except (ValueError, TypeError, AttributeError):
            bad += 1
            continue
        if a is None or {look.a, look.b} == {a, b}:
            looks.append(look)
    if bad:
        warnings.warn(f"{path}: {bad} line(s) that are not looks skipped", RuntimeWarning, stacklevel=2)
    return looks


def _check(look: Look) -> None:
    """ValueError for a line whose fields have the wrong types or values."""
    nums = (
        look.fraction,
        look.alpha,
        look.alpha_spent,
        look.diff,
        look.sd,
        look.z,
        look.ci_low,
        look.ci_high,
    )
    ok = (
        look.format_version == FORMAT_VERSION
        and isinstance(look.a, str) and isinstance(look.b, str)
        and isinstance(look.look, int) and isinstance(look.n_tasks, int) and isinstance(look.max_tasks, int)
        and all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in nums)
        and look.decision in DECISIONS
        and (look.p is None or isinstance(look.p, (int, float)))
        and (look.critical is None or isinstance(look.critical, (int, float)))
    )  # fmt: skip
    if not ok:
        raise ValueError("not a look")
    look.design()  # its own checks


def planned_looks(max_tasks: int, n_looks: int = 10) -> list[int]:
    """Tasks at each of `n_looks` equally spaced looks (the first at MIN_TASKS at least): rounds."""
    sizes = sorted({max(MIN_TASKS, math.ceil(max_tasks * k / n_looks)) for k in range(1, n_looks + 1)})
    return [s for s in sizes if s <= max_tasks] or [max_tasks]


def paired_differences(df: pl.DataFrame, a: str, b: str) -> pl.DataFrame:
    """Per task (env, configuration, task id) scored on both sides, like with like as `compare` pairs them
    (`stats.paired_tasks`: only the cells both sides scored): each side's mean over those cells and `d`,
    A − B, sorted by task: what a look is given."""
    pairs, _ = stats.paired_tasks(df.filter(pl.col("model") == a), df.filter(pl.col("model") == b))
    keys = [k for k in stats.TASK_KEYS if k in pairs.columns]
    return pairs.select(*keys, pl.col("mean_a").alias(a), pl.col("mean_b").alias(b), "d").sort(
        keys, nulls_last=True
    )


def recorded(df: pl.DataFrame, a: str, b: str) -> Look | None:
    """The last look of a sequential comparison of a and b that a run in `df` recorded, as A − B (a look
    recorded as B − A is turned round), or None."""
    if "run" not in df.columns:
        return None
    for run in df["run"].drop_nulls().unique(maintain_order=True).to_list():
        looks = read_looks(run, a, b)
        if looks:
            return looks[-1] if looks[-1].a == a else _turned(looks[-1])
    return None


def _turned(look: Look) -> Look:
    swap = {"a": "b", "b": "a"}
    return dataclasses.replace(
        look, a=look.b, b=look.a, diff=-look.diff, z=-look.z, ci_low=-look.ci_high, ci_high=-look.ci_low,
        decision=swap.get(look.decision, look.decision),
    )  # fmt: skip


SEQUENTIAL_COLUMNS = ("design", "decision", "verdict", "looks", "tasks_after_stop")


def compare(
    df: pl.DataFrame,
    a: str,
    b: str,
    by: str | None = "tier",
    method: str | None = None,
    n_boot: int | None = None,
    seed: int = 0,
    margin: float | None = None,
) -> pl.DataFrame:
    """`stats.compare`, except on a run that recorded a sequential comparison of a and b: there the overall
    row's p and interval are its last look's (the repeated p-value and interval, valid however the looks
    stopped the run), with `design`, `decision` (in words: `verdict`), `looks` and `tasks_after_stop`
    (paired tasks in `df` the last look did not see: run after the decision, or from other runs); the other
    groups' p and interval are null (a fixed-sample test of tasks a stopping rule chose is not at its
    level), their means and counts kept. Elsewhere exactly `stats.compare`."""
    df = eager(df, "compare")  # a LazyFrame (or a pandas frame, named in the error) as stats.compare takes it
    out = stats.compare(df, a, b, by=by, method=method, n_boot=n_boot, seed=seed, margin=margin)
    look = recorded(df, a, b)
    if look is None:
        return out
    overall = pl.col("group") == "all"
    design = f"sequential: {look.spending} spending over {look.max_tasks} tasks, α = {look.alpha:g}"
    design += f", delta = {look.delta:g}" if look.delta is not None else ""
    seen = out.filter(overall)["n_tasks"][0] or 0
    kept = {"p_value": look.p, "ci_low": look.ci_low, "ci_high": look.ci_high}
    frame = out.with_columns(
        *(pl.when(overall).then(pl.lit(v, pl.Float64)).otherwise(pl.lit(None, pl.Float64)).alias(k)
          for k, v in kept.items()),
        pl.lit(False).alias("p_exact"),
        pl.lit(design).alias("design"),
        pl.lit(look.decision).alias("decision"),
        pl.lit(WORDS[look.decision].format(a=a, b=b, delta=look.delta or 0)).alias("verdict"),
        pl.lit(look.look, pl.Int64).alias("looks"),
        pl.lit(max(0, seen - look.n_tasks), pl.Int64).alias("tasks_after_stop"),
    )  # fmt: skip
    return stats.Comparison(frame)


WORDS = {
    "a": "{a} better",
    "b": "{b} better",
    "no_difference": "no difference of {delta:g} or more",
    "continue": "not decided yet (the run stopped before its design did)",
    "undecided": "undecided: the planned tasks ran out",
}


def format_sequential(result: pl.DataFrame) -> str:
    """The lines `evalkit compare` prints under the table for a sequential run; empty for any other."""
    if "verdict" not in result.columns or result.height == 0:
        return ""
    r = result.filter(pl.col("group") == "all").row(0, named=True)
    line = (f"Sequential comparison ({r['design']}): {r['verdict']} after {r['looks']} look(s).\n"
            "The p and 95% CI of 'all' are its last look's repeated p-value and interval, valid whenever the "
            "looks stopped the run;\nper-group p and CI are not shown (fixed-sample tests of tasks a "
            "stopping rule chose).")  # fmt: skip
    if r["tasks_after_stop"]:
        line += (
            f"\n{r['tasks_after_stop']} paired task(s) came after the last look and are not in its result."
        )
    return line
