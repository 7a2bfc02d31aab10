"""The loop and the batch: where an agent and an environment meet.

- `episode` — `run_episode`, the one place a model (`providers`) and an environment (`envs`) meet: the loop
  of one episode, written to the run directory as it goes;
- `wording` — what the loop says to the model, in the env's own words (system prompt, opening message,
  nudges, turn notes); `probe` shows it before any episode and is a batch's preflight;
- `batch` — `run_batch`: models × surfaces × modes × tasks × repeats, resume, concurrency; `executors` runs
  its episodes on threads or Ray, `breaker` stops what can no longer succeed (a refused key, a dead env),
  `validate` checks settings before any work;
- `stepper` — `EpisodeStepper`, the same loop one model turn at a time, for a notebook.

May import: `envs`, `providers`, `records`, `browser`, the modules at evalkit's top, and `analysis` for what
a batch shows of itself when it ends (its summary files, its notebook display). Nothing imports `run` but
`cli` and evalkit's face (`evalkit/__init__.py`).
"""
