"""The workflow's configuration: schema validation, checks against ardlab's tables, and the job matrix.

The Snakefile calls ``load`` once, before any job is planned: a bad library, algorithm or model name, more
ranks or nodes than the config allows, or an empty matrix raises ValueError naming the offending key. Every
algorithm list is expanded from ``ardlab.comm``'s table (there is no second list), every model list checked
against ``ardlab.nn.models`` / ``ardlab.horovod.models``.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path

import yaml

from ardlab.comm.launch import repo_root
from ardlab.comm.libraries import DEFAULT, LIBRARIES, OWN_ALGORITHMS, TUNED, library

SCHEMA = repo_root() / "workflow" / "schemas" / "config.schema.yaml"


def schema() -> dict:
    """The JSON schema, with the library enum filled in from the table."""
    s = yaml.safe_load(SCHEMA.read_text())
    s["properties"]["libraries"]["items"]["enum"] = list(LIBRARIES)
    return s


def validate(config: dict) -> dict:
    """Schema-validate (filling defaults) and check `config` in place; return it."""
    import tempfile

    from snakemake.utils import validate as sm_validate

    # Snakemake's validator takes a schema file: write the one with the table's enum filled in.
    with tempfile.NamedTemporaryFile("w", suffix=".schema.yaml", prefix="ardlab-config-") as f:
        yaml.safe_dump(schema(), f)
        f.flush()
        sm_validate(config, f.name, set_default=True)
    check(config)
    return config


def _algorithms(spec, lib: str, key: str, *, own: bool, nodes: int) -> list[str]:
    """Expand an algorithms spec for one library (names checked against the table)."""
    table = library(lib).algorithms
    if isinstance(spec, dict):
        unknown = [k for k in spec if k not in LIBRARIES]
        if unknown:
            raise ValueError(f"config key '{key}': unknown library {unknown[0]!r}; valid: {', '.join(LIBRARIES)}")
        if lib not in spec:
            return [DEFAULT]
        spec, key = spec[lib], f"{key}.{lib}"
    if spec == "all":
        return [n for n, a in table.items() if not (a.multi_node_only and nodes < 2)]
    if spec == "default":
        return [DEFAULT]
    valid = list(table) + (list(OWN_ALGORITHMS) if own else [])
    return [n for n in spec if n in valid]


def _check_names(spec, libs: list[str], key: str, *, own: bool) -> None:
    if isinstance(spec, dict):
        for lib, sub in spec.items():
            if lib not in LIBRARIES:
                raise ValueError(f"config key '{key}': unknown library {lib!r}; valid: {', '.join(LIBRARIES)}")
            _check_names(sub, [lib], f"{key}.{lib}", own=own)
        return
    if isinstance(spec, str):
        return
    for name in spec:
        known = [lib for lib in libs if name in library(lib).algorithms or (own and name in OWN_ALGORITHMS)]
        if not known:
            valid = sorted({n for lib in libs for n in library(lib).algorithms} | (set(OWN_ALGORITHMS) if own else set()))
            raise ValueError(f"config key '{key}': algorithm {name!r} is in none of {', '.join(libs)}; "
                             f"valid: {', '.join(valid)}")


def check(config: dict) -> None:
    """Checks beyond the schema; ValueError naming the key and the bad value."""
    from ardlab.horovod.models import APPLICATIONS
    from ardlab.nn.models import MODELS

    libs = config["libraries"]
    for i, lib in enumerate(libs):
        library(lib) if lib in LIBRARIES else _bad(f"libraries[{i}]", lib, LIBRARIES)
    limits = {"ranks": config["max_ranks"], "nodes": config["max_nodes"]}
    sections = {"microbench": True, "train": True, "horovod": False}
    for section, own in sections.items():
        sec = config[section]
        if not sec["enabled"]:
            continue
        _check_names(sec["algorithms"], libs, f"{section}.algorithms", own=own)
        for what in ("ranks", "nodes") if section == "microbench" else ("ranks",):
            for v in sec[what]:
                if v > limits[what]:
                    raise ValueError(f"config key '{section}.{what}': {v} exceeds max_{what} = {limits[what]}")
        models = MODELS if section == "train" else ({**MODELS, **APPLICATIONS} if section == "horovod" else None)
        for i, m in enumerate(sec.get("models", [])):
            if m not in models:
                _bad(f"{section}.models[{i}]", m, models)
    if config["microbench"]["enabled"]:
        from ardlab.bench.sizes import parse_sizes

        try:
            parse_sizes(config["microbench"]["sizes"])
        except ValueError as e:
            raise ValueError(f"config key 'microbench.sizes': {e}") from None
        for n in config["microbench"]["nodes"]:
            bad = [r for r in config["microbench"]["ranks"] if r >= n and r % n]
            if bad:
                raise ValueError(f"config key 'microbench.ranks': {bad[0]} ranks do not divide over {n} nodes")
    if config["launcher"] == "srun":
        for lib in libs:
            if lib not in config["images"]:
                raise ValueError(f"config key 'images': launcher srun needs an Apptainer image for {lib!r}")
    elif config["microbench"]["enabled"] and max(config["microbench"]["nodes"]) > 1:
        raise ValueError("config key 'microbench.nodes': launcher local runs on one node; use launcher srun")
    if config["tuned"]["enabled"] and not config["microbench"]["enabled"]:
        raise ValueError("config key 'tuned.enabled': tuned files are made from the microbenchmark; enable it")
    if config["tuned"]["enabled"] and config["tuned"]["ranks"] is not None \
            and config["tuned"]["ranks"] not in config["microbench"]["ranks"]:
        raise ValueError(f"config key 'tuned.ranks': {config['tuned']['ranks']} is not among microbench.ranks")
    if not any(jobs(config).values()):
        raise ValueError("the configuration selects no job at all (every section disabled or empty)")


def _bad(key: str, value, valid) -> None:
    raise ValueError(f"config key '{key}': unknown value {value!r}; valid: {', '.join(valid)}")


# ------------------------------------------------------------------------------------------------ matrix


@dataclass(frozen=True)
class Job:
    kind: str  # microbench | train | horovod | microbench_tuned | train_tuned | horovod_tuned
    library: str
    algorithm: str
    ranks: int
    rep: int
    nodes: int = 1
    model: str = ""
    mode: str = ""  # train: parallel mode; horovod: fusion threshold label f<MB>

    @property
    def path(self) -> str:
        return PATTERNS[self.kind].format(**self.__dict__)


PATTERNS = {
    "microbench": "raw/microbench/{library}/{algorithm}/n{nodes}-r{ranks}/rep{rep}.csv",
    "train": "raw/train/{library}/{algorithm}/{model}-{mode}/r{ranks}/rep{rep}.csv",
    "horovod": "raw/horovod/{library}/{algorithm}/{model}-{mode}/r{ranks}/rep{rep}.csv",
}


def tuned_ranks(config: dict) -> int:
    return config["tuned"]["ranks"] or max(config["microbench"]["ranks"])


def jobs(config: dict) -> dict[str, list[Job]]:
    """Every measurement job of the config, by kind (tuned re-runs use algorithm TUNED)."""
    out: dict[str, list[Job]] = {k: [] for k in PATTERNS}
    reps = range(config["repetitions"])
    mb, tr, hv = config["microbench"], config["train"], config["horovod"]
    for lib in config["libraries"]:
        if mb["enabled"]:
            for nodes in mb["nodes"]:
                algs = _algorithms(mb["algorithms"], lib, "microbench.algorithms", own=mb["own"], nodes=nodes)
                algs += list(OWN_ALGORITHMS) if mb["own"] else []
                for alg in dict.fromkeys(algs):
                    for ranks in mb["ranks"]:
                        if ranks >= nodes and ranks % nodes == 0:
                            out["microbench"] += [Job("microbench", lib, alg, ranks, r, nodes) for r in reps]
        tuned = config["tuned"]["enabled"]
        if tr["enabled"]:
            algs = _algorithms(tr["algorithms"], lib, "train.algorithms", own=True, nodes=1)
            for alg in algs + ([TUNED] if tuned and config["tuned"]["rerun_train"] else []):
                for model in tr["models"]:
                    for mode in tr["parallel_modes"]:
                        for ranks in tr["ranks"]:
                            out["train"] += [Job("train", lib, alg, ranks, r, 1, model, mode) for r in reps]
        if hv["enabled"]:
            algs = _algorithms(hv["algorithms"], lib, "horovod.algorithms", own=False, nodes=1)
            for alg in algs + ([TUNED] if tuned and config["tuned"]["rerun_train"] else []):
                for model in hv["models"]:
                    for fusion in hv["fusion_threshold_mb"]:
                        for ranks in hv["ranks"]:
                            out["horovod"] += [Job("horovod", lib, alg, ranks, r, 1, model, f"f{fusion:g}")
                                               for r in reps]
        if tuned and mb["enabled"]:
            out["microbench"] += [Job("microbench", lib, TUNED, tuned_ranks(config), r, 1) for r in reps]
    return out


def load(path: str | Path) -> dict:
    """Read and validate a config file (for tools and tests; the Snakefile validates its own config)."""
    return validate(copy.deepcopy(yaml.safe_load(Path(path).read_text())))
