"""A sweep's grid: what the user wrote (a dict or a JSON/YAML file) checked and made explicit.

:func:`normalise_grid` turns a grid into its normal form (every list spelled out, every value of its
scenario's or parameter's type), raising :class:`GridError` with one line for anything wrong, before any
run starts. :func:`run_specs` lists the runs of a normal grid: the cartesian product of scenarios,
switch sets, option values and parameter values, with the seeds innermost; each run's id is unique.
"""

from __future__ import annotations

import itertools
import json
import os
import re
from pathlib import Path

GRID_KEYS = ("scenario", "seeds", "switches", "options", "params", "duration_s")
_UNSAFE = re.compile(r"[^A-Za-z0-9._=+-]")


class GridError(ValueError):
    """A grid that cannot be swept; the message is one line naming what is wrong."""


def read_grid(grid) -> dict:
    """``grid`` as a dict: a dict as it is, or a ``.json``, ``.yaml`` or ``.yml`` file read."""
    if isinstance(grid, dict):
        return grid
    if not isinstance(grid, (str, os.PathLike)):
        raise GridError(f"a grid is a dict or the path of a .json/.yaml file, got {type(grid).__name__}")
    path = Path(grid)
    if path.suffix not in (".json", ".yaml", ".yml"):
        raise GridError(f"{path}: a grid file ends in .json, .yaml or .yml")
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise GridError(f"cannot read the grid file {path} ({exc.strerror})") from None
    except UnicodeDecodeError:
        raise GridError(f"{path} is not UTF-8 text; write the grid as JSON or YAML") from None
    if path.suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise GridError(f"{path} is not valid JSON (line {exc.lineno}: {exc.msg})") from None
    else:
        try:
            import yaml
        except ImportError:
            raise GridError(f"reading {path} needs PyYAML (pip install pyyaml), or write the grid as JSON") from None
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" (line {mark.line + 1})" if mark is not None else ""
            raise GridError(f"{path} is not valid YAML{where}") from None
    if not isinstance(data, dict):
        raise GridError(f"{path} must hold a mapping with the keys {', '.join(GRID_KEYS)}")
    return data


def _seeds(raw) -> list[int]:
    def whole(v):
        return isinstance(v, int) and not isinstance(v, bool) and v >= 0

    if whole(raw):
        if raw == 0:
            raise GridError("seeds: 0 seeds sweeps nothing; give a count (20 means 1..20), a list or a range \"1-1000\"")
        return list(range(1, raw + 1))
    if isinstance(raw, str):
        m = re.fullmatch(r"\s*(\d+)\s*-\s*(\d+)\s*", raw)
        if not m or int(m.group(1)) > int(m.group(2)):
            raise GridError(f"seeds: {raw!r} is not a range; write \"FIRST-LAST\" with FIRST <= LAST, e.g. \"1-1000\"")
        return list(range(int(m.group(1)), int(m.group(2)) + 1))
    if isinstance(raw, list) and raw and all(whole(v) for v in raw):
        if len(set(raw)) != len(raw):
            raise GridError("seeds: the list names a seed twice; give each seed once")
        return list(raw)
    raise GridError(f"seeds: expected a count (20 means 1..20), a list of non-negative whole numbers or a range "
                    f"\"1-1000\", got {raw!r}")


def _listed(what: str, raw) -> list:
    """A grid entry's values: a scalar is a list of one; an empty list is refused."""
    values = raw if isinstance(raw, list) else [raw]
    if not values:
        raise GridError(f"{what}: an empty list sweeps nothing; give at least one value")
    for v in values:
        if not isinstance(v, (str, int, float, bool)):
            raise GridError(f"{what}: values are numbers, strings or booleans, got {v!r}")
    if len({json.dumps(v) for v in values}) != len(values):
        raise GridError(f"{what}: a value is listed twice; give each once")
    return values


def normalise_grid(grid) -> dict:
    """The normal form of ``grid`` (a dict or a JSON/YAML file's path); :class:`GridError` when it is bad.

    The normal form has every key of :data:`GRID_KEYS`: ``scenario`` a list of names, ``seeds`` a list,
    ``switches`` a list of sorted name lists, ``options``/``params`` name -> list of values converted to
    the type the scenario or parameter takes, ``duration_s`` a number or ``None`` (each scenario's own).
    """
    from ..config import BugSwitches, Config, did_you_mean
    from ..registry import get_scenario, scenario_options, scenarios

    raw = read_grid(grid)
    unknown = [k for k in raw if k not in GRID_KEYS]
    if unknown:
        raise GridError(f"unknown grid key {unknown[0]!r}{did_you_mean(unknown[0], GRID_KEYS)}; a grid has "
                        f"{', '.join(GRID_KEYS)}")
    if "scenario" not in raw:
        raise GridError("the grid names no scenario; add \"scenario\": a name or a list of names")
    names = raw["scenario"] if isinstance(raw["scenario"], list) else [raw["scenario"]]
    if not names:
        raise GridError("scenario: an empty list sweeps nothing; name at least one scenario")
    specs = []
    for name in names:
        try:
            specs.append(get_scenario(name))
        except ValueError as exc:
            raise GridError(f"scenario: {exc}") from None
    if len(set(names)) != len(names):
        raise GridError("scenario: a scenario is listed twice; give each once")
    seeds = _seeds(raw.get("seeds", 1))

    switch_sets = raw.get("switches", [[]])
    if not isinstance(switch_sets, list) or not switch_sets:
        raise GridError("switches: expected a non-empty list of switch sets, e.g. [[], [\"some_switch\"]]")
    normal_sets = []
    for entry in switch_sets:
        entry = [entry] if isinstance(entry, str) else entry
        if not isinstance(entry, list) or not all(isinstance(n, str) for n in entry):
            raise GridError(f"switches: each entry is a list of switch names, got {entry!r}")
        try:
            BugSwitches.from_names(entry)
        except ValueError as exc:
            raise GridError(f"switches: {exc}") from None
        normal_sets.append(sorted(set(entry)))
    if len({tuple(s) for s in normal_sets}) != len(normal_sets):
        raise GridError("switches: a switch set is listed twice; give each once")

    options = raw.get("options", {}) or {}
    if not isinstance(options, dict):
        raise GridError("options: expected a mapping of option name to a list of values")
    normal_options = {}
    for name, values in options.items():
        converted = []
        for v in _listed(f"option {name}", values):
            for spec in specs:
                if name in spec.options and isinstance(spec.options[name], tuple):
                    raise GridError(f"option {name} of scenario {spec.name} takes a list of records; "
                                    "a sweep varies only options that take one value")
                try:
                    scenario_options(spec, {name: v})
                except ValueError as exc:
                    raise GridError(f"options: {exc}") from None
            converted.append(scenario_options(specs[0], {name: v})[name])
        normal_options[str(name)] = converted

    params = raw.get("params", {}) or {}
    if not isinstance(params, dict):
        raise GridError("params: expected a mapping of parameter name to a list of values")
    base = Config()
    mechanism_names = {m for s in scenarios().values() for m in s.mechanisms}
    normal_params = {}
    for name, values in params.items():
        group = str(name).partition(".")[0]
        for spec in specs:
            # A parameter group named after a mechanism only matters to the scenarios exercising it.
            if group in mechanism_names and group not in spec.mechanisms:
                raise GridError(f"params: scenario {spec.name} does not exercise {group}, so parameter {name} "
                                f"would change nothing; its mechanisms: {', '.join(spec.mechanisms)}")
        converted = []
        for v in _listed(f"parameter {name}", values):
            try:
                cfg = base.with_params({name: v})
            except ValueError as exc:
                raise GridError(f"params: {exc}") from None
            value = getattr(getattr(cfg, group), str(name).partition(".")[2])
            converted.append(value)
        normal_params[str(name)] = converted

    duration = raw.get("duration_s")
    if duration is not None and (isinstance(duration, bool) or not isinstance(duration, (int, float))
                                 or not 0 < duration < float("inf")):
        raise GridError(f"duration_s: expected a positive number of simulated seconds, got {duration!r}")
    # Options and parameters in name order: grid.json is written with sorted keys and load_sweep rebuilds the run
    # ids from it, so the ids must not depend on the order a grid listed them in.
    normal = {"scenario": list(names), "seeds": seeds, "switches": normal_sets,
              "options": dict(sorted(normal_options.items())), "params": dict(sorted(normal_params.items())),
              "duration_s": None if duration is None else float(duration)}
    run_specs(normal)  # refuses a grid whose run ids would collide
    return normal


def _format(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return str(value)


def column_name(kind: str, name: str) -> str:
    """The runs-table column of an option (``kind="opt"``) or parameter (``kind="param"``)."""
    return f"{kind}_" + re.sub(r"[^A-Za-z0-9]", "_", name)


def run_specs(grid: dict) -> list[dict]:
    """The runs of a normal grid, in a fixed order: one dict per run with ``run_id``, ``scenario``,
    ``seed``, ``switches``, ``options``, ``params`` and ``duration_s``.

    A run's id is the simulator's default (``<scenario>-s<seed>`` and ``+<switch>`` per switch) followed
    by ``+opt.<name>=<value>`` for each grid option and ``+param.<name>=<value>`` for each grid parameter;
    characters a file name should not hold become ``_``. :class:`GridError` if two runs share an id.
    """
    opt_names, param_names = list(grid["options"]), list(grid["params"])
    out, seen = [], set()
    for scenario, switches, opt_values, param_values in itertools.product(
            grid["scenario"], grid["switches"], itertools.product(*grid["options"].values()),
            itertools.product(*grid["params"].values())):
        options = dict(zip(opt_names, opt_values))
        params = dict(zip(param_names, param_values))
        tail = "".join(f"+{s}" for s in switches)
        tail += "".join(f"+opt.{n}={_format(v)}" for n, v in options.items())
        tail += "".join(f"+param.{n}={_format(v)}" for n, v in params.items())
        for seed in grid["seeds"]:
            run_id = _UNSAFE.sub("_", f"{scenario}-s{seed}{tail}")
            if run_id in seen:
                raise GridError(f"two runs of the grid would share the id {run_id}; make the option and "
                                "parameter values differ in letters and digits")
            seen.add(run_id)
            out.append({"run_id": run_id, "scenario": scenario, "seed": seed, "switches": list(switches),
                        "options": options, "params": params, "duration_s": grid["duration_s"]})
    return out


def dimensions(grid: dict) -> list[str]:
    """The runs-table columns that vary across a normal grid's runs."""
    dims = [name for name, n in (("scenario", len(grid["scenario"])), ("seed", len(grid["seeds"])),
                                 ("switches", len(grid["switches"]))) if n > 1]
    dims += [column_name("opt", n) for n, v in grid["options"].items() if len(v) > 1]
    dims += [column_name("param", n) for n, v in grid["params"].items() if len(v) > 1]
    return dims
