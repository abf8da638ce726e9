"""The cost models' formulas and types: each family's coefficients, the model of a library's algorithm, a network
(``Network``), a fit's regimes and constants (``Fit``), read back from a fits table."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ardlab.cluster.links import wire_beta_us
from ardlab.comm.families import COST_FAMILIES, FAMILIES
from ardlab.comm.libraries import OWN_ALGORITHMS, library


def coefficients(model: str, n: np.ndarray, p: np.ndarray) -> np.ndarray:
    """(len, 5) matrix of the o, alpha, beta, gamma, phi (fold) coefficients of `model` (a family of
    ardlab.comm.families) at sizes n (bytes), ranks p."""
    n, p = np.asarray(n, float), np.asarray(p, float)
    fam = FAMILIES.get(model)
    if fam is None or fam.costs is None:
        raise ValueError(f"no cost model {model!r}; known: {', '.join(MODELS)}")
    a, b, c, f = (np.broadcast_to(x, n.shape).astype(float) for x in fam.costs(n, p))
    return np.stack([np.ones_like(a), a, b, c, f], axis=1)


MODELS = COST_FAMILIES


def model_of(library_name: str, algorithm: str, node_class: str = "intra") -> str | None:
    """The cost model of an algorithm; across nodes ("inter") the family of the bytes it was seen to send."""
    alg = OWN_ALGORITHMS.get(algorithm) or library(library_name).algorithms.get(algorithm)
    if alg is None:
        return None
    if node_class == "inter" and alg.traffic_family in MODELS:
        return alg.traffic_family
    return alg.cost_model


def parse_latency(text: str) -> float:
    """'1us', '0.05ms', '2e-6s' -> microseconds; ValueError naming text that is not a latency."""
    units = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}
    for unit in sorted(units, key=len, reverse=True):
        if text.endswith(unit):
            try:
                value = float(text[: -len(unit)])
            except ValueError:
                break
            if value >= 0:
                return value * units[unit]
            break
    raise ValueError(f"latency {text!r} is not a time like 1us, 0.05ms or 2e-6s (a number >= 0 and one of "
                     f"{', '.join(units)})")


@dataclass(frozen=True)
class Network:
    """A network to predict for: its link rate (tc notation, e.g. 100gbit) and per-message latency (us)."""
    link_rate: str
    latency_us: float

    @property
    def beta_us(self) -> float:
        return wire_beta_us(self.link_rate)


@dataclass
class Regime:
    """One set of constants, for the sizes from `from_bytes` up to the next regime's."""
    from_bytes: float
    overhead_us: float
    alpha_us: float
    beta_us_per_byte: float
    gamma_us_per_byte: float
    fold_us_per_byte: float = 0.0  # phi: per byte of the fold (0 where the fits saw no rank count that folds)

    @property
    def constants(self) -> np.ndarray:
        return np.array([self.overhead_us, self.alpha_us, self.beta_us_per_byte, self.gamma_us_per_byte,
                         self.fold_us_per_byte])


@dataclass
class Fit:
    library: str
    algorithm: str
    model: str
    node_class: str  # intra (one node) | inter (several)
    regimes: list[Regime]  # by size, the first from 0
    points: int
    median_rel_err: float
    max_rel_err: float
    status: str  # "ok" or "rejected: <why>"
    link_rate: str = ""  # the emulated cluster's link rate ("": not measured on one)
    gamma_folded: bool = False  # beta and gamma proportional at every point: beta holds both, gamma is 0

    def predict(self, n, p) -> np.ndarray:
        n = np.asarray(n, float)
        A = coefficients(self.model, n, p)
        t = np.zeros(len(n))
        for r in self.regimes:
            t = np.where(n >= r.from_bytes, A @ r.constants, t)
        return t

    def rows(self) -> list[dict]:
        """The fit as table rows, one per regime."""
        head = {k: getattr(self, k) for k in ("library", "algorithm", "model", "node_class", "link_rate")}
        tail = {k: getattr(self, k) for k in ("gamma_folded", "points", "median_rel_err", "max_rel_err", "status")}
        return [{**head, "regime": i, **r.__dict__, **tail} for i, r in enumerate(self.regimes)]

    def on(self, network: Network) -> "Fit":
        """This inter-node fit moved to another network: alpha is its latency, beta (and the fold's phi) its wire
        time per byte plus the per-byte cost the measured link did not explain."""
        if self.node_class != "inter" or self.link_rate in ("", "none"):
            raise ValueError(f"{self.library} {self.algorithm}: only a fit across nodes at a known link rate can be "
                             f"moved to another network (this one: {self.node_class}, link rate {self.link_rate!r})")
        host = wire_beta_us(self.link_rate)
        regimes = [Regime(r.from_bytes, r.overhead_us, network.latency_us,
                          network.beta_us + max(0.0, r.beta_us_per_byte - host), r.gamma_us_per_byte,
                          network.beta_us + max(0.0, r.fold_us_per_byte - host) if r.fold_us_per_byte else 0.0)
                   for r in self.regimes]
        return dataclasses.replace(self, regimes=regimes, link_rate=network.link_rate)


FIT_COLUMNS = ["library", "algorithm", "model", "node_class", "link_rate", "regime", "from_bytes", "overhead_us",
               "alpha_us", "beta_us_per_byte", "gamma_us_per_byte", "fold_us_per_byte", "gamma_folded", "points",
               "median_rel_err", "max_rel_err", "status"]


def read_fits(path) -> list[Fit]:
    """The fits of a costmodel_fits.csv (`ardlab predict` writes it), e.g. from the user's own cluster."""
    df = pd.read_csv(path, dtype={"link_rate": str}, keep_default_na=False)
    missing = [c for c in FIT_COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"{path}: not a cost-model fit table of this ardlab (columns {missing} missing; "
                         "`ardlab predict --fit <microbenchmark csv files>` writes one)")
    fits = []
    for key, g in df.groupby(["library", "algorithm", "node_class", "link_rate"], sort=False):
        g = g.sort_values("regime")
        r0 = g.iloc[0]
        if r0.model not in MODELS:
            raise ValueError(f"{path}: {r0.library} {r0.algorithm}: unknown model {r0.model!r}")
        regimes = [Regime(float(r.from_bytes), float(r.overhead_us), float(r.alpha_us), float(r.beta_us_per_byte),
                          float(r.gamma_us_per_byte), float(r.fold_us_per_byte)) for r in g.itertuples()]
        fits.append(Fit(r0.library, r0.algorithm, r0.model, r0.node_class, regimes, int(r0.points),
                        float(r0.median_rel_err), float(r0.max_rel_err), r0.status, r0.link_rate,
                        str(r0.gamma_folded) == "True"))
    return fits
