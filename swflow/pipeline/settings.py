"""One frozen settings tree: everything a run is asked to do, before it sees any data.

The command line, a TOML ``--config`` file and :class:`~swflow.pipeline.estimator.Synthesizer`'s keywords all
end in :func:`build`, which returns a :class:`Settings`. Its tables are the configuration
dataclasses, so a key's home is derived, never written down:

    [privacy]  PrivacySpec        epsilon, noise_multiplier, delta, adjacency, accountant, ...
    [shape]    RunShape           steps, epochs, n_projections, pool_size, bins, batch_size
    [flow]     SimulatorSettings  n_particles, step_size, diffusion, smoothing, manifold, seed, device, ...
    [adapt]    AdaptSettings      adapt_decoder, adapt_share, adapt_steps, ... (DP adaptation of the decoder)
    [options]  the method's own   e.g. dpsgd-sw-gen's activation_clip, jacobian_clip

``steps`` lives in ``[shape]`` only: :meth:`Settings.plan` works out the run's length once
(:func:`swflow.methods.plan.resolve`) and :meth:`Settings.flow_config` hands it to the simulator.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Mapping

from ..methods.registry import METHODS, method
from ..core.config import AdaptSettings, FlowConfig, PrivacySpec, RunShape, SimulatorSettings
from .options import field_type

__all__ = ["Settings", "TABLES", "build", "config_path", "from_keywords", "from_options", "home_of", "read_config",
           "shipped_configs", "split_keywords"]

#: the configuration tables, each a dataclass; "options" is the chosen method's own (MethodSpec.options)
TABLES = {"privacy": PrivacySpec, "shape": RunShape, "flow": SimulatorSettings, "adapt": AdaptSettings}
OPTIONS = "options"


@dataclass(frozen=True)
class Settings:
    """What a run is asked to do: method, budget, shape, simulator and the method's own options.

    privacy_seed : seed of the privacy noise, for reproducible experiments only (None: a fresh secret one)
    sketch : flows: quantile levels a saved model keeps per released direction
    """

    method: str
    privacy: PrivacySpec
    shape: RunShape
    flow: SimulatorSettings
    options: Any = None  # an instance of the method's option dataclass, or None
    adapt: AdaptSettings = AdaptSettings()
    privacy_seed: int | None = None
    sketch: int | None = 64

    def plan(self, dataset_size: int, dim: int):
        """These settings' :class:`~swflow.methods.plan.RunPlan` on ``dataset_size`` rows in dimension ``dim``."""
        from ..methods.plan import resolve

        return resolve(self.method, self.shape, dataset_size=dataset_size, dim=dim, privacy=self.privacy,
                       step_size=self.flow.step_size)

    def flow_config(self, plan) -> FlowConfig:
        """The simulator configuration of ``plan`` (flows only)."""
        return self.flow.config(steps=plan.steps, step_size=plan.step_size)

    def option_values(self) -> dict:
        """The method's own options as keywords (empty for a method without any)."""
        return {} if self.options is None else asdict(self.options)

    def to_tables(self) -> dict:
        """Plain nested values (for a saved file); ``build(method, tables)`` reads them back."""
        tables = {name: asdict(getattr(self, name)) for name in TABLES}
        if self.options is not None:
            tables[OPTIONS] = self.option_values()
        return {"method": self.method, **tables, "privacy_seed": self.privacy_seed, "sketch": self.sketch}


def _table_classes(method_name: str | None) -> dict:
    classes = dict(TABLES)
    options = method(method_name).option_class() if method_name is not None else None
    if options is not None:
        classes[OPTIONS] = options
    return classes


def home_of(key: str, method_name: str | None = None) -> str | None:
    """The table a key belongs to (None: none of them — a command's own key, the TOML ``[run]`` table).
    Without a method, any method's option names ``options``."""
    for table, cls in TABLES.items():
        if key in {f.name for f in fields(cls)}:
            return table
    option_classes = ([method(method_name).option_class()] if method_name is not None else
                      [spec.option_class() for spec in METHODS.values()])
    if any(cls is not None and key in {f.name for f in fields(cls)} for cls in option_classes):
        return OPTIONS
    return None


def split_keywords(method_name: str, keywords: Mapping[str, Any]) -> dict[str, dict]:
    """Flat keywords (``epsilon=``, ``steps=``, ``n_particles=``, ...) sorted into their tables; a keyword
    with no home is a TypeError that lists the ones there are."""
    tables: dict[str, dict] = {}
    for key, value in keywords.items():
        home = home_of(key, method_name)
        if home is None:
            known = sorted(f.name for cls in _table_classes(method_name).values() for f in fields(cls))
            raise TypeError(f"unknown settings [{key!r}]; {method_name} takes {', '.join(known)}")
        tables.setdefault(home, {})[key] = value
    return tables


def build(method_name: str, tables: Mapping[str, Mapping[str, Any]], *, privacy_seed: int | None = None,
          sketch: int | None = 64) -> Settings:
    """The :class:`Settings` of ``method_name`` from tables of plain values. Raises ValueError for a bad
    setting (before any data is read or any budget spent)."""
    if method_name not in METHODS:
        raise ValueError(f"unknown method {method_name!r}; choose one of {sorted(METHODS)}")
    spec, classes = method(method_name), _table_classes(method_name)
    homes: dict[str, str] = {}  # each key's table, worked out once (home_of's order: the first table wins)
    for table, cls in classes.items():
        for f in fields(cls):
            homes.setdefault(f.name, table)
    for table, values in tables.items():
        if table not in classes:
            raise ValueError(f"{method_name} has no [{table}] settings; tables: {', '.join(classes)}")
        for key in values:
            if homes.get(key) != table:
                raise ValueError(f"{key!r} is not a [{table}] setting"
                                 + (f": it belongs in [{homes[key]}]" if key in homes else ""))
    privacy = dict(tables.get("privacy", {}))
    if privacy.get("epsilon") is None and privacy.get("noise_multiplier") is None:
        if spec.private:
            raise ValueError(f"{method_name} is private: give `epsilon` or `noise_multiplier` (`epsilon` = inf: "
                             "no privacy)")
        privacy["epsilon"] = math.inf
    if privacy.get("epsilon") is not None and math.isnan(privacy["epsilon"]):
        raise ValueError("`epsilon` is NaN: give a number > 0, or inf for no privacy")
    privacy_spec = PrivacySpec(**privacy)
    spec.check_budget(private=privacy_spec.private)
    options = classes[OPTIONS](**tables.get(OPTIONS, {})) if OPTIONS in classes else None
    adapt = AdaptSettings(**tables.get("adapt", {}))
    if adapt.adapt_decoder and not privacy_spec.private:
        raise ValueError("`adapt_decoder` spends part of a budget: give `epsilon` (a finite one)")
    if adapt.adapt_decoder and privacy_spec.noise_multiplier is not None:
        raise ValueError("`adapt_decoder` splits a target budget between two releases: give `epsilon`, not "
                         "`noise_multiplier`")
    return Settings(method=method_name, privacy=privacy_spec, shape=RunShape(**tables.get("shape", {})),
                    flow=SimulatorSettings(**tables.get("flow", {})), options=options, privacy_seed=privacy_seed,
                    sketch=sketch, adapt=adapt)


def from_options(method_name: str, options: Mapping[str, Any], *, manifold: str = "ball",
                 norm_bound: float | None = None, privacy_seed: int | None = None) -> Settings:
    """The :class:`Settings` of ``method_name`` from parsed options keyed by setting name (the command's flags, a
    --config file's values among them), in one call. ``manifold``: the default the data source implies;
    ``norm_bound``: the bound R the data file declares (None: R = 1)."""
    from .options import values

    classes = _table_classes(method_name) if method_name in METHODS else dict(TABLES)
    tables = {table: values(cls, options) for table, cls in classes.items()}
    tables["privacy"].update(epsilon=options["epsilon"], noise_multiplier=options["noise_multiplier"],
                             clip=options.get("clip", False))
    if norm_bound is not None:
        tables["privacy"]["norm_bound"] = norm_bound
    if "n_particles" in tables["flow"]:  # commands with the simulator options (generate)
        tables["flow"]["manifold"] = options.get("manifold") or manifold
    return build(method_name, tables, privacy_seed=privacy_seed)


def from_keywords(method_name: str, *, privacy_seed: int | None = None, sketch: int | None = 64,
                  **keywords) -> Settings:
    """The :class:`Settings` of ``method_name`` from flat keywords (``epsilon=``, ``steps=``, ``n_particles=``,
    the method's options, ...), as :class:`~swflow.pipeline.estimator.Synthesizer` takes them."""
    return build(method_name, split_keywords(method_name, keywords), privacy_seed=privacy_seed, sketch=sketch)


RUN = "run"  # the TOML table of a command's own keys (dataset, method, out, ...)


def shipped_configs() -> dict[str, Path]:
    """The named configs that ship with swflow (the papers' settings): name -> file."""
    from importlib.resources import files

    return {p.name.removesuffix(".toml"): Path(str(p)) for p in files("swflow").joinpath("configs").iterdir()
            if p.name.endswith(".toml")}


def config_path(path_or_name: str) -> Path:
    """A --config value as a file: a path to a TOML file, or the name of a shipped config
    (``fashion-mnist-dpswflow-r``, with or without ``.toml``)."""
    path = Path(path_or_name)
    if path.is_file():
        return path
    shipped = shipped_configs()
    name = path.name.removesuffix(".toml")
    if path.parent == Path(".") and name in shipped:
        return shipped[name]
    raise ValueError(f"config {path_or_name} not found: give a TOML file, or one of the shipped configs "
                     f"({', '.join(sorted(shipped))})")


def read_config(path: str) -> dict[str, dict]:
    """A TOML file's tables (a path, or a shipped config's name), each key checked against its home and its type
    (the dataclass field's). ``[run]`` holds the command's own keys, checked by the command."""
    import tomllib

    path = str(config_path(path))
    try:
        with open(path, "rb") as f:
            tables = tomllib.load(f)
    except FileNotFoundError:
        raise ValueError(f"config file {path} not found") from None
    except tomllib.TOMLDecodeError as err:
        raise ValueError(f"{path} is not valid TOML ({err})") from None
    for table, values in tables.items():
        if table not in (RUN, *TABLES, OPTIONS) or not isinstance(values, dict):
            raise ValueError(f"{path}: unknown table [{table}]; use {', '.join((RUN, *TABLES, OPTIONS))}")
        for key, value in values.items():
            home = home_of(key) or RUN
            if home != table:
                raise ValueError(f"{path}: key {key!r} in [{table}]: it belongs in [{home}]")
            if table != RUN:
                _check_type(path, table, key, value)
    return tables


def _check_type(path: str, table: str, key: str, value) -> None:
    classes = [TABLES[table]] if table in TABLES else [spec.option_class() for spec in METHODS.values()]
    field = next(f for cls in classes if cls is not None for f in fields(cls) if f.name == key)
    kind = field_type(field)
    expected = (int, float) if kind is float else (kind,)
    if kind is not None and (not isinstance(value, expected) or (isinstance(value, bool) and kind is not bool)):
        names = {int: "an integer", float: "a number", str: "a string", bool: "true or false"}
        raise ValueError(f"{path}: [{table}] {key} = {value!r}: expected {names[kind]}")
