"""Heuristic search for good plans: cheapest-insertion construction, then iterated local search.

A plan is held as one sequence of vessels per berth. Decoding a sequence starts each vessel as early as it
can (after its arrival, after the previous vessel plus the clearance, clear of closures and of vessels
alongside, ending by the horizon): for a fixed assignment and order that is optimal, because starting
earlier never ends later and the objective only grows with start times. So the search is over assignments
and orders only, and every decoded plan is feasible by construction (the grader checks it regardless).

Deterministic: the same instance, seed and budget give the same plan on every machine (no wall clock).
"""

from __future__ import annotations

import random
from bisect import bisect_left
from dataclasses import dataclass

from .model import Instance, berthed_end, fits, work_units

INF = 1 << 60


class Tables:
    """Per vessel and fitting berth: the end of a stay for each start, and the earliest feasible start at or
    after each hour. Indices: vessels and berths in instance order."""

    def __init__(self, inst: Instance):
        self.inst = inst
        self.H, self.gap = inst.horizon, inst.gap
        self.vids = [v.id for v in inst.vessels]
        self.bids = [b.id for b in inst.berths]
        self.arrival = [v.arrival for v in inst.vessels]
        self.weight = [v.weight for v in inst.vessels]
        self.options: list[list[int]] = []
        self.end: dict[tuple[int, int], list[int]] = {}
        self.earliest: dict[tuple[int, int], list[int]] = {}
        self.penalty: dict[tuple[int, int], int] = {}
        cum = [self._work(b.id) for b in inst.berths]
        for vi, v in enumerate(inst.vessels):
            opts = [bi for bi, b in enumerate(inst.berths) if fits(v, b)]
            self.options.append(opts)
            for bi in opts:
                c, need = cum[bi], 2 * v.hours[self.bids[bi]]
                ends = [bisect_left(c, c[s] + need) for s in range(self.H + 1)]
                self.end[vi, bi] = ends
                self.earliest[vi, bi] = self._earliest(bi, ends)
                cur = inst.current.get(v.id)
                moved = v.id not in inst.affected and cur is not None and cur[0] != self.bids[bi]
                self.penalty[vi, bi] = inst.move_cost if moved else 0

    def _work(self, berth: str) -> list[int]:
        """Cumulative half-hours of work done at `berth` from hour 0 up to each hour."""
        span = 3 * self.H + 8  # past any end: at half speed a stay at most doubles
        cum = [0]
        for h in range(span):
            cum.append(cum[-1] + work_units(self.inst, berth, h))
        return cum

    def _earliest(self, bi: int, ends: list[int]) -> list[int]:
        inst, bid = self.inst, self.bids[bi]
        closures = [(c.start, c.end) for c in inst.closures if c.berth == bid]
        alongside = [(b.since, berthed_end(inst, b)) for b in inst.berthed if b.berth == bid]
        out = [-1] * (self.H + 2)
        for s in range(self.H, -1, -1):
            e = ends[s]
            ok = e <= self.H
            for a, z in closures:
                ok = ok and (e <= a or s >= z)
            for a, z in alongside:
                ok = ok and (s >= z + self.gap or e + self.gap <= a)
            out[s] = s if ok else out[s + 1]
        return out

    def decode(self, bi: int, seq: list[int]) -> tuple[int, list[int]]:
        """Cost and starts of the vessels `seq` at berth `bi`, each as early as it can; INF if one cannot."""
        t, cost, starts = 0, 0, []
        for vi in seq:
            r = max(self.arrival[vi], t)
            if r > self.H:
                return INF, starts
            s = self.earliest[vi, bi][r]
            if s < 0:
                return INF, starts
            starts.append(s)
            cost += self.weight[vi] * (s - self.arrival[vi]) + self.penalty[vi, bi]
            t = self.end[vi, bi][s] + self.gap
        return cost, starts

    def cost(self, bi: int, seq: list[int]) -> int:
        return self.decode(bi, seq)[0]

    def plan(self, seqs: list[list[int]]) -> list[tuple[str, str, int]]:
        out = []
        for bi, seq in enumerate(seqs):
            _, starts = self.decode(bi, seq)
            out += [(self.vids[vi], self.bids[bi], s) for vi, s in zip(seq, starts, strict=True)]
        return sorted(out, key=lambda e: (e[1], e[2], e[0]))


@dataclass
class Solution:
    seqs: list[list[int]]
    costs: list[int]

    @property
    def total(self) -> int:
        return sum(self.costs)

    def copy(self) -> Solution:
        return Solution([list(s) for s in self.seqs], list(self.costs))


def from_plan(t: Tables, plan: dict[str, tuple[str, int]]) -> Solution:
    """The sequences of a plan (vessel → (berth, start)), ordered by start."""
    seqs: list[list[int]] = [[] for _ in t.bids]
    for vi in sorted(range(len(t.vids)), key=lambda i: plan[t.vids[i]][1]):
        seqs[t.bids.index(plan[t.vids[vi]][0])].append(vi)
    return Solution(seqs, [t.cost(bi, s) for bi, s in enumerate(seqs)])


def insert_best(t: Tables, sol: Solution, vi: int) -> bool:
    """Insert vessel `vi` where it adds least; False when no position is feasible."""
    best = (INF, -1, -1)
    for bi in t.options[vi]:
        seq = sol.seqs[bi]
        for pos in range(len(seq) + 1):
            c = t.cost(bi, seq[:pos] + [vi] + seq[pos:])
            if c - sol.costs[bi] < best[0]:
                best = (c - sol.costs[bi], bi, pos)
    if best[1] < 0:
        return False
    _, bi, pos = best
    sol.seqs[bi].insert(pos, vi)
    sol.costs[bi] += best[0]
    return True


ORDERS = ("arrival", "weighted", "current", "longest")


def construct(t: Tables, order: str = "arrival") -> Solution | None:
    """Cheapest insertion of the vessels in one of the `ORDERS`; None if some vessel finds no place."""
    inst = t.inst
    n = range(len(t.vids))
    key = {
        "arrival": lambda i: (t.arrival[i], -t.weight[i], i),
        "weighted": lambda i: (t.arrival[i] - 4 * t.weight[i], i),
        "current": lambda i: (inst.current.get(t.vids[i], ("", t.arrival[i]))[1], i),
        "longest": lambda i: (-min(t.end[i, b][0] for b in t.options[i]), i),
    }[order]
    sol = Solution([[] for _ in t.bids], [0] * len(t.bids))
    for vi in sorted(n, key=key):
        if not insert_best(t, sol, vi):
            return None
    return sol


def descend(t: Tables, sol: Solution, rng: random.Random) -> Solution:
    """Relocate and swap moves, first improvement in a random order, until none improves."""
    improved = True
    while improved:
        improved = False
        for vi in rng.sample(range(len(t.vids)), len(t.vids)):
            if _relocate(t, sol, vi) or _swap(t, sol, vi, rng):
                improved = True
    return sol


def _where(sol: Solution, vi: int) -> tuple[int, int]:
    for bi, seq in enumerate(sol.seqs):
        if vi in seq:
            return bi, seq.index(vi)
    raise ValueError(vi)


def _relocate(t: Tables, sol: Solution, vi: int) -> bool:
    a, i = _where(sol, vi)
    rest = sol.seqs[a][:i] + sol.seqs[a][i + 1 :]
    base = t.cost(a, rest)
    for b in t.options[vi]:
        seq = rest if b == a else sol.seqs[b]
        old = sol.costs[a] + (0 if b == a else sol.costs[b])
        for pos in range(len(seq) + 1):
            if b == a and pos == i:
                continue
            c = t.cost(b, seq[:pos] + [vi] + seq[pos:])
            new = c + (0 if b == a else base)
            if new < old:
                if b != a:
                    sol.seqs[a], sol.costs[a] = rest, base
                sol.seqs[b] = seq[:pos] + [vi] + seq[pos:]
                sol.costs[b] = c
                return True
    return False


def _swap(t: Tables, sol: Solution, vi: int, rng: random.Random) -> bool:
    a, i = _where(sol, vi)
    for uj in rng.sample(range(len(t.vids)), len(t.vids)):
        if uj == vi:
            continue
        b, j = _where(sol, uj)
        if a == b:
            seq = list(sol.seqs[a])
            seq[i], seq[j] = uj, vi
            c = t.cost(a, seq)
            if c < sol.costs[a]:
                sol.seqs[a], sol.costs[a] = seq, c
                return True
        elif b in t.options[vi] and a in t.options[uj]:
            sa, sb = list(sol.seqs[a]), list(sol.seqs[b])
            sa[i], sb[j] = uj, vi
            ca, cb = t.cost(a, sa), t.cost(b, sb)
            if ca + cb < sol.costs[a] + sol.costs[b]:
                sol.seqs[a], sol.costs[a], sol.seqs[b], sol.costs[b] = sa, ca, sb, cb
                return True
    return False


def _kick(t: Tables, sol: Solution, rng: random.Random, k: int) -> Solution:
    """Take `k` random vessels out and put them back at random feasible places (then cheapest ones)."""
    out = sol.copy()
    moved = rng.sample(range(len(t.vids)), min(k, len(t.vids)))
    for vi in moved:
        bi, i = _where(out, vi)
        del out.seqs[bi][i]
        out.costs[bi] = t.cost(bi, out.seqs[bi])
    for vi in moved:
        bi = rng.choice(t.options[vi])
        pos = rng.randint(0, len(out.seqs[bi]))
        trial = out.seqs[bi][:pos] + [vi] + out.seqs[bi][pos:]
        c = t.cost(bi, trial)
        if c < INF:
            out.seqs[bi], out.costs[bi] = trial, c
        elif not insert_best(t, out, vi):
            return sol.copy()
    return out


def heuristic(inst: Instance, rounds: int = 200, seed: int = 0, tables: Tables | None = None) -> Solution:
    """The best of every construction order after local search, improved by `rounds` of iterated local
    search (kick 2–4 vessels, descend, keep if not worse). Raises ValueError if no construction is
    feasible."""
    t = tables or Tables(inst)
    rng = random.Random(seed)
    starts = [s for s in (construct(t, o) for o in ORDERS) if s is not None]
    if inst.current and all(v in inst.current for v in t.vids):
        kept = from_plan(t, inst.current)
        if kept.total < INF:
            starts.append(kept)
    if not starts:
        raise ValueError(f"{inst.task_id}: no feasible plan found by construction")
    best = min((descend(t, s, rng) for s in starts), key=lambda s: s.total)
    cur = best.copy()
    for _ in range(rounds):
        trial = descend(t, _kick(t, cur, rng, rng.randint(2, 4)), rng)
        if trial.total <= cur.total:
            cur = trial
            if trial.total < best.total:
                best = trial.copy()
    return best
