"""The run directory and its readers: everything evalkit knows of a run is read or written here.

- `rundir` — a run directory's files: the trace writer and reader (one "latest record per key" rule, from
  `keys`), the frame store, `run.json`; `lock` the one-writer lock of a run directory; `jsonl` its line
  reader, `live` the progress files of a batch still running; `kept` the index kept as the trace is written;
- `transcripts` — what the model was sent and answered, message by message;
- `columns`, `_index`, `index_cache`, `loading` — runs as Polars frames: the declared columns, the fast
  index reader, the cached index, `load_runs` / `turns` / `calls`;
- `grades`, `plans`, `viewer_marks` — rewards given elsewhere, the plans a text env was sent, where a
  computer-use action landed on the screen it was taken on (drawn by the viewer, the bundle and notebooks);
  `settings` — a run's settings that change an episode; `scans` — what scanners found and what a
  person said of it; `calls` — how a recorded call is told from another;
- `importers/` — runs other harnesses wrote, read as they wrote them (a foreign directory is never written),
  ATIF trajectories and Inspect logs among them; `exporters/` — runs written out in those two formats.

May import: the modules at evalkit's top (`types`, `wellformed`, `errors`, `secrets`). A reader needs no
model and no environment: nothing here imports `envs`, `providers`, `run`, `analysis` or `view`.
"""
