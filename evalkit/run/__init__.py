"""The loop and the batch: where an agent and an environment meet.

- `episode` — `Episode`, one episode in progress (open → step → conclude), the one place a model
  (`providers`) and an environment (`envs`) meet and the one place that decides how an episode ended;
  `run_episode` drives one to its end, `play` does so for each job of a batch; `pictures` takes its frames;
- `stepper` — `EpisodeStepper`, the same Episode driven one model turn at a time, for a notebook;
- `wording` — what the loop says to the model, in the env's own words (system prompt, opening message,
  nudges, turn notes); `probe` shows it before any episode;
- `settings` — `Settings`, each knob of a batch declared once (default, check, help, whether it changes
  an outcome); `evalkit run`'s flags and `run.json` come from it;
- `batch` — `run_batch`: models × surfaces × modes × tasks × repeats, resume, concurrency, on the env
  resolved once at its door (`evalkit.envs.target`); `executors` runs its episodes on threads or Ray,
  `breaker` stops what can no longer succeed (a refused key, a dead env), `validate` checks what enters.

May import: `envs`, `providers`, `records`, `browser`, the modules at evalkit's top, and `analysis` for the
summary files a batch writes when it ends. Nothing imports `run` but `cli` and evalkit's face
(`evalkit/__init__.py`).
"""
