"""The client side of an environment: what evalkit knows of an env and how an episode's session talks to it.

- `target` — the env resolved once at the door (a served env, a base URL, an EnvSession or a factory), the
  preflight that resets it once before any episode, and its preparation for a batch;
- `selection` — which tasks a run runs (an evalset, task ids, reset rows, or a split drawn by position)
  and what each is called;
- `sessions` — opening an episode's session on any env; `openenv` — OpenEnv sessions (MCP and typed-action)
  over `wire` (the WebSocket protocol) and `loopback` (pictures read from a server on this machine);
  `tasks` — the OpenEnv Task API; `observation` — what a reset or a tool result shows, withheld from the
  model where it must be; `identity` — the configuration an env reports; `actions` — a sample action typed
  from a schema, for the probe.

May import: `evalkit.envs` (the embedded envs' names and declarations), `values`, and the modules at
evalkit's top. Never the embedded servers (`evalkit.envs.embedded`): a client talks to a server over the
wire, whoever serves it.
"""
