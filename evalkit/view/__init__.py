"""What the trace viewer and the static bundle share: the viewer's logic kept out of Streamlit so that it is
tested as plain functions. The Streamlit pages themselves are `viewer/` at the top of the checkout.

- `support` — which runs to show, the episode table, filters, an episode's steps (its neighbours' names
  are re-exported there: `from evalkit.view import support as vs`);
- `pairs` — A vs B: one side per model and run, the tasks both ran, their paired comparison;
- `search` — search over what the model said and did at every step; `text` — trace text shown safely;
- `links` — deep links; `serve` — `evalkit view`'s Streamlit server; `live` — a batch still running;
- `why` — the Why view's scans, tables and steps (the numbers are `analysis.why`'s);
- `bundle/` — `evalkit bundle`: the same views as a static site.

May import: `records`, `analysis`, `scanners` (the keyless rules, run over the episodes on view; a judge is
never asked from here) and the modules at evalkit's top. Never `run`, `envs` or `providers`: a viewer reads
runs, it does not make them.
"""
