"""Alpha-beta-gamma cost models of Allreduce algorithms, fitted to microbenchmarks, predicting beyond them.

T(n, p) = o + a(p, n) * alpha + b(p) * n * beta + c(p) * n * gamma + f(p) * n * phi, with n the message size in
bytes, alpha the latency per message (us), beta the transfer time per byte, gamma the reduction time per byte
(Thakur, Rabenseifner and Gropp 2005; Patarasuk and Yuan 2009), plus o, the per-call software overhead (LogP's o),
which on one node is of the order of alpha and would otherwise be forced into it, and phi, the cost per byte of
the fold: where p is not a power of two, recursive doubling and Rabenseifner first fold the p - 2^k extra ranks'
vectors into partners and send the result back at the end (f = 2: the whole vector there and back). The fold
is a phase of its own (its transfers are serial, half the ranks idle, the reduction between them unoverlapped):
measured across 3 nodes at 1 Gbit/s, Intel MPI's Rabenseifner took 2.1-2.2x the wire time of its fold's and
reduce-scatter's bytes, the others (MPICH's, Open MPI's, ours) 0.83-1.35x, so the fold gets its own constant instead
of beta's.
Each algorithm in ardlab.comm's table names its model (``Algorithm.cost_model``), so this module holds the
formulas once per family:

- recursive_doubling: lg p steps of the whole vector (+ the fold's 2 steps when p is not a power of two);
- rabenseifner: recursive-halving reduce-scatter + recursive-doubling allgather (+ the fold's);
- ring: 2(p-1) steps of n/p; segmented_ring: the same bytes, one message per segment;
- binomial: binomial reduce + binomial bcast, 2 lg p steps of the whole vector;
- recursive_multiplying: k-ary recursive doubling (k=2 in MPICH's defaults: as recursive_doubling);
- linear: p-1 whole vectors to a root and back.

Fits are least squares with o, alpha, beta, gamma >= 0 (scipy), per library, algorithm, node class (one
node: intra-node constants; several: inter-node) and link rate (the emulated cluster's, recorded in every
row). Across nodes an algorithm is modelled by the bytes its ranks put on the wire (the table's ``traffic``
family where the byte counts showed another family than its name suggests, e.g. Intel MPI's
topo_reduce_bcast moves a ring's bytes). Where an algorithm's beta and gamma coefficients are proportional at
every measured point (every family here once the fold has its own constant: b = 2c, or b = c for recursive
doubling) only their combination is determined: gamma is then 0 and beta holds the whole per-byte cost
(``gamma_folded``). A fit is rejected, with the reason, when it has fewer than 4 sizes, or its median relative
error exceeds 50%.

Against a known link (the emulated cluster's tc rate): the inter-node beta of a bandwidth-optimal algorithm
should be 8/rate seconds per byte (``ground_truth``), and follow the rate between two settings
(``rate_scaling``). Held out (``validate``): the largest sizes, the larger rank counts (one node) or the
largest node count (several nodes); a held-out point is *decided* where the paired interval of the predicted
pick's time over the measured best's lies wholly on one side of 1.10.

For another network (``Network``: a user's link rate and latency) the inter-node fits keep their software
overhead o and the per-byte cost the measured link did not explain (reduction, copies, the TCP stack:
beta - 8/rate_measured), and take the given latency as alpha and 8/rate as the wire's beta.

Regimes: the per-message and per-byte costs are not the same at every size (the library switches from eager
to rendezvous copies at a few KiB; the working set leaves the caches beyond a few hundred KiB: measured here,
4x the size costs 8-10x the time between 256 KiB and 1 MiB). A fit therefore may split at measured sizes into
up to three sets of constants, each fitted on its own points (>= 4 sizes in the first, >= 3 in the others);
more splits are taken where they at least halve the sum of squared relative errors of the fit kept so far,
which must miss by more than 1% (RMS), over all points or over those from the split's lowest size up (scatter
that no constants explain below it, such as ranks time-sharing cores at a few bytes, must not veto constants
that describe the larger sizes: on the emulated cluster at 1 Gbit/s it had kept Open MPI's ring at one set of
constants, predicting 4 MiB on 4 nodes at 0.88x the measured time, 0.97x with the split).
"""

from ardlab.analysis.costmodel.fit import (  # noqa: F401  (the package's face)
    KEY,
    MAX_SPLITS,
    MIN_REGIME_SIZES,
    MIN_SIZES,
    SPLIT_GAIN,
    SPLIT_MIN_RMS,
    fit_all,
    fit_one,
)
from ardlab.analysis.costmodel.ground_truth import (  # noqa: F401  (the package's face)
    GROUND_TRUTH_COLUMNS,
    GROUND_TRUTH_MIN_SIZES,
    GROUND_TRUTH_TOLERANCE,
    RATE_SCALING_COLUMNS,
    ground_truth,
    ground_truth_rows,
    rate_scaling,
)
from ardlab.analysis.costmodel.model import (  # noqa: F401  (the package's face)
    FIT_COLUMNS,
    MODELS,
    Fit,
    Network,
    Regime,
    coefficients,
    model_of,
    parse_latency,
    read_fits,
)
from ardlab.analysis.costmodel.predict import (  # noqa: F401  (the package's face)
    predict,
    prediction_fits,
)
from ardlab.analysis.costmodel.validate import (  # noqa: F401  (the package's face)
    HELD_SIZES,
    HOLDOUTS,
    LINK_BOUND,
    SCORE_COLUMNS,
    WITHIN,
    TooFewSizes,
    default_proxy,
    score,
    validate,
)
from ardlab.cluster.links import wire_beta_us  # noqa: F401  (the wire's beta, beside the fitted ones)
