"""Environments: the OpenEnv client session and the embedded OpenEnv servers.

`EMBEDDED` maps a name to the `module:function` that builds its FastAPI app; `evalkit serve NAME` and
`evalkit.serve(NAME)` run it under uvicorn. Clients never import a server module except through this table.
`evalsets` holds the frozen task sets the embedded envs' tasks are drawn from.

May import: `browser` and the modules at evalkit's top. An environment never sees the model (`providers`)
nor the loop that drives it (`run`).
"""

EMBEDDED = {
    "canvas": "evalkit.envs.canvas:build_app",
    "webapp": "evalkit.envs.webapp:build_app",
    "berth": "evalkit.envs.berth:build_app",
}

SURFACES = {"canvas": ("tools", "html", "gui"), "webapp": ("gui",), "berth": ("tools",)}
MODES = {"canvas": ("reference", "description"), "webapp": ("task",), "berth": ("text",)}
"""What each embedded env offers; a batch that names none runs the first of each (berth's one mode, `text`,
is neutral: it has no canvas-style modes)."""
SCREEN_SURFACES = {"canvas": ("gui",), "webapp": ("gui",)}
"""Surfaces a model sees as a screen: skins and screen coordinates (`--skins`, `--coordinates`) apply."""
SKINS = {"canvas": ("classic", "midnight", "studio", "paper")}
