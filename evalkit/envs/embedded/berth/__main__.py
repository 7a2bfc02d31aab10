"""`python -m evalkit.envs.embedded.berth`: write the frozen evalset with best known plans, or show a task as
the model reads it. Apart from `tasks` because writing the evalset needs the search (`reference`), which needs
tasks."""

from __future__ import annotations

import argparse

from evalkit.envs.embedded.berth.tasks import TIERS, task_from_id


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="berth task tools")
    parser.add_argument(
        "--write-evalset", metavar="PATH", nargs="?", const="",
        help="write the test evalset with best known plans (default: data/evalsets/berth-test-150.json)",
    )  # fmt: skip
    parser.add_argument("--tasks", type=int, help="number of test tasks in the evalset (default 150)")
    parser.add_argument("--workers", type=int, help="processes searching for best plans (default: all cores)")
    parser.add_argument("--show", metavar="TASK_ID", help="print a task's situation as the model reads it")
    args = parser.parse_args(argv)
    if args.write_evalset is not None:
        # start-up: the reference search (scipy, a process pool) only for writing the evalset
        from evalkit.envs.embedded.berth.reference import EVALSET_PATH, EVALSET_SIZE, write_evalset

        path = args.write_evalset or EVALSET_PATH
        data = write_evalset(path, args.tasks or EVALSET_SIZE, args.workers)
        rows = data["tasks"]
        tiers = {t: sum(r["tier"] == t for r in rows) for t in TIERS}
        proven = sum(r["best_optimal"] for r in rows)
        print(f"wrote {path}: {len(rows)} tasks, id {data['evalset_id']}, tiers {tiers}, {proven} optimal")
    if args.show:
        from evalkit.envs.embedded.berth.prompts import opening  # start-up (as above)

        task = task_from_id(args.show)
        print(f"tier {task.tier}, difficulty {task.difficulty_score}\n\n{opening(task.instance)}")
    if args.write_evalset is None and not args.show:
        parser.print_help()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
