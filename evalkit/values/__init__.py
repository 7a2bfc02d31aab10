"""Values: what a value may be, checked where it enters, and values made to fit.

- `checks` — what a value a user gives must be: a finite number within its bounds (`Number`: the check of a
  value from Python and the argparse type of its flag, from one declaration), names, a choice, reset
  arguments, a path evalkit will write, a URL, a port; each a one-line ConfigError naming the option;
- `knobs` — a setting declared once (`Knob`: its default, help, check, flag and whether it changes what an
  episode is): a run's settings dataclass is its knobs, and its flags, its run.json and resume's
  comparison come from them (`evalkit.run.settings`, the own-loop runner's `evalkit.ownloop.task`);
- `fitting` — values that fit a JSON schema: the probe's example step and `baseline:random`'s draws.

May import: the modules at evalkit's top. Every part may import it.
"""
