"""The loop and the batch: where an agent and an environment meet.

- `episode` — `Episode`, one episode in progress under the loop's rules (open → think/act → finish), the one
  place a model (`providers`) and an environment (`envs`) meet and the one place that decides how an episode
  ended; `run_episode` drives one to its end, `play` does so for each job of a batch. Beside it: `rules`
  (the turn budget, the finishing tool, auto-submit, answers, nudges, the screen: a new rule goes here),
  `wording` (what the loop says to the model, in the env's own words), `reply` (one model call and what its
  failures mean), `recording` (how the record keeps what happened: turns, plans, frames through `pictures`,
  cost, transcript, live progress), `jobs` (what one episode is, and a batch's plan of them);
- `stepper` — `EpisodeStepper`, the same Episode driven a turn at a time for a notebook, through the
  operator's narrow door (`operator`: edit, discard, inject, submit, the frame now);
- `settings` — `Settings`, each knob of a run declared once (a new setting goes here): `evalkit run`'s
  flags, `run.json` and resume's comparison come from it; every driver takes it with keyword overrides;
- `batch` — `run_batch`: models × surfaces × modes × tasks × repeats, resume, concurrency, on the env
  made ready at its door (`evalkit.envs.client.prepare`); `executors` runs its episodes on threads or Ray,
  `breaker` stops what can no longer succeed (a refused key, a dead env), `budget` what would cost more
  than asked (`--max-cost`; an episode's `--episode-max-cost`, which `recording` meters), `rounds` runs a
  batch in rounds until its paired comparison is decided (`--until-decided`); `probe` shows what evalkit
  sees of an env before any episode.

May import: `envs`, `providers`, `records`, `browser`, the modules at evalkit's top, and `analysis` for the
summary files a batch writes when it ends. Nothing imports `run` but `cli` and evalkit's face
(`evalkit/__init__.py`).
"""
