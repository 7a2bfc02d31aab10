"""Environments, in two packages with a line between them: `client` (what evalkit knows of an env and the
sessions an episode opens on it, on anyone's server) and `embedded` (evalkit's own envs and their serving).
A client never imports a server: they share only what this module declares and the task-set files.

`EMBEDDED` maps a name to the `module:function` that builds its FastAPI app; `evalkit serve NAME` and
`evalkit.serve(NAME)` run it under uvicorn; `SURFACES`, `MODES`, `SCREEN_SURFACES` and `SKINS` say what each
offers, so a batch checks what it was asked before a server starts. `evalsets` is the frozen task-set file
format: the embedded envs write theirs, a run reads and selects from one.

May import: `browser`, `values` and the modules at evalkit's top. An environment never sees the model
(`providers`) nor the loop that drives it (`run`).
"""

EMBEDDED = {
    "canvas": "evalkit.envs.embedded.canvas:build_app",
    "webapp": "evalkit.envs.embedded.webapp:build_app",
    "berth": "evalkit.envs.embedded.berth:build_app",
}

SURFACES = {"canvas": ("tools", "html", "gui"), "webapp": ("gui",), "berth": ("tools",)}
MODES = {"canvas": ("reference", "description"), "webapp": ("task",), "berth": ("text",)}
"""What each embedded env offers; a batch that names none runs the first of each (berth's one mode, `text`,
is neutral: it has no canvas-style modes)."""
SCREEN_SURFACES = {"canvas": ("gui",), "webapp": ("gui",)}
"""Surfaces a model sees as a screen: skins and screen coordinates (`--skins`, `--coordinates`) apply."""
SKINS = {"canvas": ("classic", "midnight", "studio", "paper")}
