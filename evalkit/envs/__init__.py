"""Environments: the OpenEnv client session and the embedded OpenEnv servers.

`EMBEDDED` maps a name to the `module:function` that builds its FastAPI app; `evalkit serve NAME` and
`evalkit.serve(NAME)` run it under uvicorn. Clients never import a server module except through this table.
"""

EMBEDDED = {
    "canvas": "evalkit.envs.canvas:build_app",
    "webapp": "evalkit.envs.webapp:build_app",
}

SURFACES = {"canvas": ("tools", "html", "gui"), "webapp": ("gui",)}
MODES = {"canvas": ("reference", "description"), "webapp": ("task",)}
"""What each embedded env offers; a batch that names none runs the first of each."""
SCREEN_SURFACES = {"canvas": ("gui",), "webapp": ("gui",)}
"""Surfaces a model sees as a screen: skins and screen coordinates (`--skins`, `--coordinates`) apply."""
SKINS = {"canvas": ("classic", "midnight", "studio", "paper")}
