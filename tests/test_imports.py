"""The modules of evalkit import each other in one direction: no circle, not even through an import made
inside a function; and its parts import only the parts below them, as each package's docstring says."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "evalkit"
VIEWER = PACKAGE.parent / "viewer"

BASE = {"types", "wellformed", "errors", "secrets", "serving", "notices", "values"}
"""The modules at evalkit's top, and the `values` package, that every part may use."""
MAY_IMPORT = {
    **{m: BASE for m in BASE},
    "browser": BASE,
    "envs": BASE | {"browser"},
    "records": BASE,
    "providers": BASE | {"records"},
    "analysis": BASE | {"records"},
    "view": BASE | {"records", "analysis"},
    "viewer": BASE | {"records", "analysis", "view"},
    "run": BASE | {"browser", "envs", "providers", "records", "analysis"},
    "ownloop": BASE | {"browser", "envs", "records", "analysis"},
    "scanners": BASE | {"records", "analysis", "providers"},
}
"""Each part → the parts it may import. `cli` and evalkit's face (`evalkit/__init__.py`) may import any."""


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, modules: set[str]) -> set[str]:
    """The evalkit modules `path` imports anywhere in it, but its own packages (importing a module imports
    them first anyway)."""
    here = module_name(path)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1] + [base]
                ).strip(".")
            names = [f"{base}.{a.name}" for a in node.names] + [base]
        else:
            continue
        for name in names:
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name and name != here and not here.startswith(name + "."):
                found.add(name)
    return found


def test_no_import_circle():
    paths = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph = {m: imports(p, set(paths)) for m, p in paths.items()}
    state: dict[str, int] = {}

    def visit(m: str, trail: list[str]) -> None:
        state[m] = 1
        for n in sorted(graph[m]):
            assert state.get(n) != 1, "import circle: " + " → ".join(trail[trail.index(n) :] + [n])
            if n not in state:
                visit(n, trail + [n])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])


def part(module: str) -> str:
    """`evalkit.records.rundir` → records, `evalkit.types` → types, `viewer.app` → viewer (`evalkit` itself:
    evalkit)."""
    names = module.split(".")
    return names[0] if names[0] == "viewer" or len(names) == 1 else names[1]


def test_parts_import_only_what_is_below_them():
    paths = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    modules = set(paths) | {"evalkit"}
    found = []
    for m, path in [*paths.items(), *((f"viewer.{p.stem}", p) for p in VIEWER.glob("*.py"))]:
        if part(m) in ("cli", "evalkit"):
            continue
        assert part(m) in MAY_IMPORT, f"{m} is in no part: add its part to MAY_IMPORT"
        for n in imports(path, modules) if m.startswith("evalkit") else viewer_imports(path, modules):
            if part(n) != part(m) and part(n) not in MAY_IMPORT[part(m)]:
                found.append(f"{m} → {n}")
    assert not found, "imports against the layout: " + ", ".join(sorted(found))


def test_the_loop_does_not_reach_into_the_display():
    """`run` may write a batch's summary files (`analysis.summary`), never reach into what shows things in a
    notebook: a record knows its run directory (`EpisodeRecord.run_dir`), and notices have their module."""
    paths = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    found = [f"{m} → {n}" for m, p in paths.items() if part(m) in ("run", "ownloop")
             for n in imports(p, set(paths)) if n == "evalkit.analysis.display"]  # fmt: skip
    assert not found


def viewer_imports(path: Path, modules: set[str]) -> set[str]:
    """The evalkit modules a viewer page imports (its own package aside)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("evalkit"):
            names = [f"{node.module}.{a.name}" for a in node.names] + [node.module]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        for name in names:
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name and name != "evalkit":
                out.add(name)
    return out


def test_the_public_api_resolves_every_name_it_offers():
    import evalkit as ek

    for name in ek.__all__:
        assert getattr(ek, name) is not None, name
    assert ek.plots.reward_by_tier and ek.transcripts.messages
    assert issubclass(ek.MissingKeyError, ek.ConfigError)
    from evalkit import analysis, display, plots, report  # what the notebooks import

    assert plots is ek.plots and display.record_html and report.build_report
    assert analysis.load_runs is ek.load_runs and analysis.compare is ek.compare and analysis.write_summary


def test_clients_never_import_env_servers():
    """OpenEnv's rule: a client talks to a server over the wire, whoever serves it. Nothing of the env client
    (`evalkit.envs.client`) imports an embedded server, and the loop reaches them through one door alone
    (`evalkit.run.executors.serve_embedded`, which a batch hands the client's preparation)."""
    paths = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    modules = set(paths)
    servers = [
        f"{m} → {n}"
        for m, path in paths.items()
        if m.startswith("evalkit.envs.client") or part(m) == "run"
        for n in imports(path, modules)
        if n.startswith("evalkit.envs.embedded") and m != "evalkit.run.executors"
    ]
    assert not servers, "imports of env servers: " + ", ".join(sorted(servers))
    door = imports(paths["evalkit.run.executors"], modules)
    assert {n for n in door if n.startswith("evalkit.envs.embedded.")} == {
        "evalkit.envs.embedded.process",
        "evalkit.envs.embedded.server",
    }
