"""The workflow's configuration: schema validation, checks against ardlab's tables, and the job matrix.

The Snakefile calls ``load`` once, before any job is planned: a bad library, algorithm or model name, more
ranks or nodes than the config allows, or an empty matrix raises ValueError naming the offending key. Every
algorithm list is expanded from ``ardlab.comm``'s table (there is no second list), every model list checked
against ``ardlab.nn.models`` / ``ardlab.horovod.models``.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path

import yaml

from ardlab.comm.launch import repo_root
from ardlab.comm.libraries import DEFAULT, LIBRARIES, OWN_ALGORITHMS, library
from ardlab.results import MICROBENCH_ROWS
from ardlab.study.kinds import KINDS, PATTERNS, SECTIONS, TRAINING, Job, scales, section_kind, skipped, tuned_ranks

# what the workflow reads from here, some of it declared in ardlab.study.kinds
__all__ = ["Job", "PATTERNS", "algorithms", "check", "check_images", "jobs", "load", "measured_scale", "parse_scale",
           "schema", "TRAINING", "tuned_ranks", "tuned_rerun", "tuned_scale", "validate"]

SCHEMA = repo_root() / "workflow" / "schemas" / "config.schema.yaml"


def schema() -> dict:
    """The JSON schema, with the enums filled in from where each list is defined: the libraries (the table), the
    launchers (ardlab.plan) and the picks; each kind's options from their declaration (ardlab.study.kinds: the
    microbenchmark's ardlab.bench.allreduce.Plan, ardlab.nn's TrainConfig, Horovod's TFConfig); and each training
    kind's section made from the training keys every such kind has (definitions/training) and its own axis."""
    from ardlab.plan import LAUNCHERS, schema_properties
    from ardlab.results import PICKS

    s = yaml.safe_load(SCHEMA.read_text())
    p = s["properties"]
    p["libraries"]["items"]["enum"] = list(LIBRARIES)
    p["launcher"]["enum"] = list(LAUNCHERS)
    s["definitions"]["picks"]["items"]["enum"] = list(PICKS)
    training = s["definitions"].pop("training")
    for section in SECTIONS:
        kind = section_kind(section)
        if kind.trains:
            sec = p[section] = copy.deepcopy({k: v for k, v in training.items() if k != "description"})
            sec["properties"][kind.axis.key] = {"type": "array", "items": dict(kind.axis.item_schema), "minItems": 1,
                                                "default": list(kind.axis.default)}
        elif section not in p:
            if kind.schema is None:
                raise ValueError(f"measurement kind {kind.name!r}: its config section {section!r} is neither in "
                                 f"{SCHEMA.name} nor its Kind's schema (ardlab.study.kinds)")
            p[section] = copy.deepcopy(dict(kind.schema))
        if kind.options is not None:
            p[section]["properties"].update(schema_properties(kind.options))
    return s


def validate(config: dict) -> dict:
    """Schema-validate (filling defaults) and check `config` in place; return it."""
    import tempfile

    from snakemake.utils import validate as sm_validate

    s = schema()
    _nulls(config, s)
    # Snakemake's validator takes a schema file: write the one with the table's enum filled in.
    with tempfile.NamedTemporaryFile("w", suffix=".schema.yaml", prefix="ardlab-config-") as f:
        yaml.safe_dump(s, f)
        f.flush()
        sm_validate(config, f.name, set_default=True)
    check(config)
    return config



def check_images(config: dict) -> None:
    """Every image the config names is a file that holds this checkout's ardlab (its labels, as containers/build wrote
    them: ardlab.images.provenance), so that no job runs another ardlab than the one that plans and reads the rows.
    Run before the first job (the Snakefile's onstart; a dry run of a cluster's config is planned on machines without
    the images)."""
    import shutil

    from ardlab.images import provenance

    if config["launcher"] != "srun":
        return
    for lib in config["libraries"]:
        image = config["images"].get(lib)
        if not image:
            continue
        if not Path(image).is_file():
            raise ValueError(f"config key 'images.{lib}': {image!r} is not a file (containers/build makes the images; "
                             "a relative path is read from the repository's root)")
        if not shutil.which("apptainer"):
            raise ValueError(f"config key 'images.{lib}': {image!r} cannot be checked against this checkout: "
                             "apptainer is not on PATH where the workflow starts (load its module first)")
        try:
            provenance.check(Path(image), lib)
        except ValueError as e:
            raise ValueError(f"config key 'images.{lib}': {e}") from None

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
            valid = sorted({n for lib in libs for n in library(lib).algorithms}
                           | (set(OWN_ALGORITHMS) if own else set()))
            raise ValueError(f"config key '{key}': algorithm {name!r} is in none of {', '.join(libs)}; "
                             f"valid: {', '.join(valid)}")


def _nulls(config: dict, s: dict) -> None:
    """`--config reference=null` on Snakemake's command line arrives as the text 'null': where the schema allows
    null and not that text (a string key's value 'null' is no folder or name a user means), make it null."""
    for key, sub in s.get("properties", {}).items():
        if key not in config:
            continue
        types = sub.get("type", [])
        types = [types] if isinstance(types, str) else types
        if config[key] == "null" and "null" in types:
            config[key] = None
        elif isinstance(config[key], dict) and "object" in types:
            _nulls(config[key], sub)


def check(config: dict) -> None:
    """Checks beyond the schema; ValueError naming the key and the bad value."""
    libs = config["libraries"]
    for i, lib in enumerate(libs):
        library(lib) if lib in LIBRARIES else _bad(f"libraries[{i}]", lib, LIBRARIES)
    limits = {"ranks": config["max_ranks"], "nodes": config["max_nodes"]}
    for section in SECTIONS:
        sec, kind = config[section], section_kind(section)
        if not sec["enabled"]:
            continue
        _check_names(sec["algorithms"], libs, f"{section}.algorithms", own=kind.own)
        for what in ("ranks", "nodes"):
            for v in sec[what]:
                if v > limits[what]:
                    raise ValueError(f"config key '{section}.{what}': {v} exceeds max_{what} = {limits[what]}")
        models = kind.models() if kind.trains else {}
        for i, m in enumerate(sec.get("models", [])):
            if m not in models:
                _bad(f"{section}.models[{i}]", m, models)
        for i, entry in enumerate(sec.get("skip", [])):
            if "model" in entry and entry["model"] not in sec["models"]:
                _bad(f"{section}.skip[{i}].model", entry["model"], sec["models"])
            if not any(skipped({"skip": [entry]}, m, r, n) for m in sec["models"] for n, r in scales(sec)):
                raise ValueError(f"config key '{section}.skip[{i}]': {entry} matches no training group of the section")
    for section in SECTIONS:
        sec = config[section]
        for n in sec["nodes"] if sec["enabled"] and not sec.get("ranks_per_node") else ():
            bad = [r for r in sec["ranks"] if r >= n and r % n]
            if bad:
                raise ValueError(f"config key '{section}.ranks': {bad[0]} ranks do not divide over {n} nodes")
        if sec["enabled"] and sec.get("ranks_per_node") and not scales(sec):
            raise ValueError(f"config key '{section}.ranks_per_node': {sec['ranks_per_node']} leaves no (nodes, ranks) "
                             f"pair of nodes {sec['nodes']} and ranks {sec['ranks']}")
    if config["microbench"]["enabled"]:
        from ardlab.bench.sizes import parse_sizes

        try:
            parse_sizes(config["microbench"]["sizes"])
        except ValueError as e:
            raise ValueError(f"config key 'microbench.sizes': {e}") from None
    if config["launcher"] == "srun":
        for lib in libs if config["images"] else ():
            if lib not in config["images"]:
                raise ValueError(f"config key 'images': {lib!r} has no Apptainer image; name one for every library, "
                                 "or none (the library environments then run on every node)")
    else:
        for section in SECTIONS:
            if config[section]["enabled"] and max(config[section]["nodes"]) > 1:
                raise ValueError(f"config key '{section}.nodes': launcher local runs on one node; use launcher srun")
    _check_link_rate(config)
    _check_link_queue(config)
    _check_library_env(config)
    for section in SECTIONS:
        sec = config[section]
        if section_kind(section).trains and sec["enabled"] and sec["picks"]:
            missing = [s for s in scales(sec) if not measured_scale(config, *s)]
            if missing:
                nodes, ranks = missing[0]
                raise ValueError(f"config key '{section}.picks': the algorithms are picked from the microbenchmark at "
                                 f"the training's scale, which does not measure {nodes} node(s) x {ranks} ranks; "
                                 "add it to microbench (nodes, ranks) or drop the picks")
    if config["tuned"]["enabled"] and not config["microbench"]["enabled"]:
        raise ValueError("config key 'tuned.enabled': tuned files are made from the microbenchmark; enable it")
    if config["tuned"]["enabled"] and config["tuned"]["ranks"] is not None \
            and config["tuned"]["ranks"] not in config["microbench"]["ranks"]:
        raise ValueError(f"config key 'tuned.ranks': {config['tuned']['ranks']} is not among microbench.ranks")
    if config["reference"] and not (Path(config["reference"]) / "raw").is_dir():
        raise ValueError(f"config key 'reference': {config['reference']} is not a finished run folder (no raw/)")
    if config["reference"] and Path(config["reference"]).resolve() == Path(config["results"]).resolve():
        raise ValueError("config key 'reference': a run cannot be its own reference")
    for i, folder in enumerate(config["costmodel"]["also_fit"]):
        if not any(Path(folder).glob(MICROBENCH_ROWS)):
            raise ValueError(f"config key 'costmodel.also_fit[{i}]': {folder!r} holds no microbenchmark rows "
                             f"({MICROBENCH_ROWS}); run that study first")
    if not any(jobs(config).values()):
        raise ValueError("the configuration selects no job at all (every section disabled or empty)")


def _check_library_env(config: dict) -> None:
    """Each library's own settings name a library of the run and leave the table's selection variables alone;
    values become strings (the environment's)."""
    for lib, settings in config["library_env"].items():
        if lib not in config["libraries"]:
            raise ValueError(f"config key 'library_env': {lib!r} is not among the run's libraries "
                             f"({', '.join(config['libraries'])})")
        taken = sorted(set(settings) & library(lib).selection_vars())
        if taken:
            raise ValueError(f"config key 'library_env.{lib}': {taken[0]} is how ardlab forces an algorithm or reads "
                             "a tuned file; name the algorithm in microbench/train/horovod.algorithms instead")
        config["library_env"][lib] = {k: str(v).lower() if isinstance(v, bool) else str(v)
                                      for k, v in settings.items()}


def _check_link_rate(config: dict) -> None:
    """The config's link rate is a rate, and on the emulated cluster the one its links have."""
    from ardlab.cluster.links import check_rate, link_rate

    rate = config["link_rate"]
    if rate is None:
        return
    try:
        rate = check_rate(rate) or "none"
    except ValueError as e:
        raise ValueError(f"config key 'link_rate': {e}") from None
    actual = link_rate()
    if actual and actual != rate:
        raise ValueError(f"config key 'link_rate': {rate}, but the emulated cluster of SLURM_CONF has links at "
                         f"{actual}; bring it up with `ardlab cluster up --rate {rate}` or change the config")


def _check_link_queue(config: dict) -> None:
    """The config's link queue is a queue (a name of ardlab.cluster.links.QUEUES, a time or bytes), and on the
    emulated cluster the one its links have; its name is what the config then holds (run.yaml records it)."""
    from ardlab.cluster.links import check_queue, link_queue, queue_name

    queue = config.get("link_queue")
    if queue is None:
        return
    try:
        queue = queue_name(check_queue(queue))
    except ValueError as e:
        raise ValueError(f"config key 'link_queue': {e}") from None
    actual = link_queue()
    if actual and actual != "none" and actual != queue:
        raise ValueError(f"config key 'link_queue': {queue}, but the emulated cluster of SLURM_CONF queues {actual}; "
                         f"bring it up with `ardlab cluster up --queue {queue}` or change the config")
    config["link_queue"] = queue


def _bad(key: str, value, valid) -> None:
    raise ValueError(f"config key '{key}': unknown value {value!r}; valid: {', '.join(valid)}")


# ------------------------------------------------------------------------------------------------ matrix


def parse_scale(text: str) -> tuple[int, int]:
    """(nodes, ranks) of a training group's scale folder: r<ranks> (one node) or n<nodes>-r<ranks>."""
    m = re.fullmatch(r"(?:n(\d+)-)?r(\d+)", text)
    if not m:
        raise ValueError(f"{text!r} is not a scale folder (r<ranks> or n<nodes>-r<ranks>)")
    return int(m.group(1) or 1), int(m.group(2))


def measured_scale(config: dict, nodes: int, ranks: int) -> bool:
    """Whether the microbenchmark measures `ranks` ranks on `nodes` nodes."""
    mb = config["microbench"]
    return mb["enabled"] and (nodes, ranks) in scales(mb)


def tuned_scale(config: dict, nodes: int, ranks: int) -> tuple[int, int]:
    """(nodes, ranks) of the tuned file a training group at that scale uses: its own scale's where the microbenchmark
    measures it, else the tuned phase's (one node, tuned_ranks)."""
    return (nodes, ranks) if measured_scale(config, nodes, ranks) else (1, tuned_ranks(config))


def algorithms(config: dict, section: str, lib: str, nodes: int = 1) -> list[str]:
    """The algorithms of `lib` that a section's comparison groups measure (ours included where configured)."""
    sec = config[section]
    own = sec.get("own", False)  # the microbenchmark's: also measure ardlab's own algorithms
    algs = _algorithms(sec["algorithms"], lib, f"{section}.algorithms", own=section_kind(section).own, nodes=nodes)
    return list(dict.fromkeys(algs + (list(OWN_ALGORITHMS) if own else [])))


def tuned_rerun(config: dict, kind: str) -> bool:
    """Whether the groups of measurement kind `kind`, a training kind's, also measure the tuned files (and what they
    select)."""
    return config["tuned"]["enabled"] and config["microbench"]["enabled"] and config["tuned"]["rerun_train"] \
        and KINDS[kind].trains


def site_builds(config: dict) -> bool:
    """Whether the config measures a site's own build beside the wheel of its family (the report's site_vs_wheel)."""
    libs = set(config["libraries"])
    return any(library(lib).site is not None and library(lib).family in libs for lib in libs)


def jobs(config: dict) -> dict[str, list[Job]]:
    """Every measurement job of the config (one per comparison group and round), by kind (ardlab.study.kinds)."""
    return {name: kind.jobs(config, kind) if config[kind.section]["enabled"] else [] for name, kind in KINDS.items()}


def load(path: str | Path) -> dict:
    """Read and validate a config file (for tools and tests; the Snakefile validates its own config)."""
    return validate(copy.deepcopy(yaml.safe_load(Path(path).read_text())))
