"""Environments: the OpenEnv client session and the embedded OpenEnv servers.

`EMBEDDED` maps a name to the `module:function` that builds its FastAPI app; `evalkit serve NAME` and
`evalkit.serve(NAME)` run it under uvicorn. Clients never import a server module except through this table.
"""

EMBEDDED = {
    "canvas": "evalkit.envs.canvas:build_app",
    "berth": "evalkit.envs.berth:build_app",
}

SURFACES = {"canvas": ("tools",), "berth": ("tools",)}
# An env without modes of its own has one neutral mode; the first mode is the default of a batch.
MODES = {"canvas": ("reference", "description"), "berth": ("text",)}
