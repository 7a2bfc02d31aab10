"""evalkit's own environments, and their serving: real OpenEnv servers that run on a fresh machine with no
keys, so that everything a user's own server goes through is exercised.

- `canvas`, `berth`, `webapp` — one package per env (its tasks, its tools, its grader, its FastAPI app);
- `episodic` — the MCP environment base they share; `recycle` — env instances handed from a finished
  session to the next;
- `server` — an embedded env served in a thread (`evalkit.serve`, `evalkit serve NAME`); `process` — served by
  child processes, for a batch of many episodes at once (`serve_embedded`).

May import: `browser`, `evalkit.envs` (the names and declarations of `EMBEDDED`), `envs.evalsets` (the task
sets they write), and the modules at evalkit's top. Never the client (`evalkit.envs.client`), the model
(`providers`) nor the loop that drives them (`run`).
"""
