"""The README is a front page made from the repository: its table is the committed table file as `ardlab report`
wrote it, its figure and links exist, and it stays within two screens of text (issue 42)."""

import json
import re

from conftest import ROOT

README = (ROOT / "README.md").read_text()


def test_the_headline_table_is_the_committed_file():
    """A marked copy (tests/test_copies.py checks every copy against its file)."""
    table = (ROOT / "results" / "study" / "tables" / "study_headline_short.md").read_text().strip()
    assert "<!-- copy: results/study/tables/study_headline_short.md -->" in README
    assert table in README


def test_every_local_link_and_figure_exists():
    targets = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README)
    assert targets
    missing = [t for t in targets if not t.startswith("http") and not (ROOT / t).exists()]
    assert not missing, missing


def test_the_front_page_is_two_screens():
    """At most 110 lines (two screens of a 120-column terminal, table rows counted once)."""
    assert len(README.splitlines()) <= 110


def test_the_advise_example_is_a_committed_answer():
    """The README's `ardlab advise` output is a committed answer's (results/advise/<run>/answer.md): its first line,
    the recommendation, and its first table; the numbers of its first stage are its check-defaults.csv's."""
    import pandas as pd

    from ardlab.advise import answer
    from ardlab.analysis.copies import table_lines

    named = re.findall(r"`(results/advise/[\w.-]+/answer\.md)`", README)
    assert named, "the README names no committed advise answer"
    for path in named:
        lines = (ROOT / path).read_text().splitlines()
        start, end = table_lines(lines)
        assert "\n".join(lines[start:end]) in README, path
        assert f"> {lines[2]}" in README, path  # the recommendation, quoted
        words = " ".join(README.split())
        first = ROOT / path.replace("answer.md", "check-defaults.csv")
        if first.is_file():
            check = pd.read_csv(first)
            m, lo, hi = answer._speedup(check, ("mpich", "default"), ("openmpi", "default"), 2)
            assert f"{m:.2f}x [{lo:.2f}, {hi:.2f}] over Open MPI's default (largest of 3" in words
            steps = {p["library"]: p for p in json.loads((ROOT / path.replace(".md", ".json")).read_text())["steps"]
                     if p["setting"] == "default"}
            ms = {lib: {k: round(v * 1e3) for k, v in p.items() if k.endswith("_s")} for lib, p in steps.items()}
            assert (f"Allreduce take {ms['mpich']['allreduce_s']}-{ms['openmpi']['allreduce_s']} ms a step (predicted: "
                    f"{ms['mpich']['predicted_allreduce_s']}-{ms['openmpi']['predicted_allreduce_s']} ms), Intel MPI's "
                    f"{ms['intelmpi']['allreduce_s']} ms") in words
            assert (f"by the rest ({ms['mpich']['rest_s']} ms, against {ms['openmpi']['rest_s']}-"
                    f"{ms['intelmpi']['rest_s']} ms)") in words


def test_the_study_sections_numbers_are_the_tables():
    """The words under the README's study table are made from the committed pooled claims
    (results/study/tables/study_vs_ardlab.csv): each range and count recomputed here."""
    import pandas as pd

    t = pd.read_csv(ROOT / "results" / "study" / "tables" / "study_vs_ardlab.csv")

    def span(claim: str, regime: str, library: str | None = None) -> str:
        x = t[(t.claim == claim) & (t.regime == regime) & ((t.library == library) if library else True)].speedup
        return f"{x.min():.2f}-{x.max():.2f}x"

    assert f"tuned files train {span('tuned', '1 rank a node')} their" in README
    assert f"predicted slowest default {span('fastest_over_slowest_default', '1 rank a node')};" in README
    shared = "ranks time-share the cores"
    assert f"generic one is {span('tuned', shared, 'intelmpi')}, not" in " ".join(README.split())
    across = t[(t.claim == "fastest_over_slowest_default") & (t.regime == shared)]
    significant = int(((across.ci_low > 1) | (across.ci_high < 1)).sum())
    text = " ".join(README.split())
    assert (f"the across-library gap {span('fastest_over_slowest_default', shared)} is significant in "
            f"{significant} of the {len(across)} runs") in text
    one = t[(t.regime == "1 rank a node") & t.claim.isin(["tuned", "fastest_over_slowest_default"])]
    assert all((one.ci_high < one.study) | (one.ci_low > one.study)), "every interval excludes the study's"


def test_the_one_node_sections_numbers_are_the_tables():
    """The README's one-node words are made from the two reference runs' committed tables (headline,
    microbench_speedup, training_defaults): each range and count recomputed here."""
    import pandas as pd

    runs = [ROOT / "results" / "runs" / name / "tables" for name in ("reference-a", "reference-b")]
    text = " ".join(README.split())

    def span(values) -> str:
        return f"{min(values):.2f}-{max(values):.2f}x"

    heads = [pd.read_csv(t / "headline.csv") for t in runs]
    gains = [r.speedup for h in heads for r in h.itertuples()
             if "largest significant speedup of an algorithm over the default" in r.claim]
    assert len(gains) == 6 and f"over its library's default is {span(gains)}" in text
    points = [pd.read_csv(t / "microbench_speedup.csv") for t in runs]
    points = [p[p.algorithm != "default"].speedup_vs_default_verdict for p in points]
    assert {len(p) for p in points} == {488} and "of 488 (algorithm, size) points" in text
    faster, slower = ([int((p == v).sum()) for p in points] for v in ("faster", "slower"))
    assert f"{faster[0]} and {faster[1]} are significantly faster, {slower[0]} and {slower[1]} slower" in text
    over_mpich = [r.speedup for h in heads for r in h.itertuples()
                  if r.claim.endswith("over mpich's default") and r.where.startswith("intelmpi/default at 16 B")]
    assert len(over_mpich) == 2 and f"Intel MPI's default is {span(over_mpich)} faster than MPICH's at 16 B" in text
    defaults = pd.concat(pd.read_csv(t / "training_defaults.csv") for t in runs)
    tf = defaults[(defaults.framework == "tensorflow") & (defaults.library == "mpich")]
    assert len(tf) == 4 and set(tf.speedup_verdict) == {"faster"}
    assert f"MPICH's default trains {span(tf.speedup)} faster than the other two in both runs" in text
    nn = defaults[defaults.framework == "ardlab.nn"].speedup
    assert f"all defaults lie within {max(max(nn), 1 / min(nn)):.2f}x" in text


def test_the_replication_shares_are_the_tables():
    """The README's replication shares are the committed reproduce summaries: each replication pair's
    (results/study/runs.yaml) speedup claims counted once per comparison, and the reference pair's claims."""
    import pandas as pd

    text = " ".join(README.split())

    def row(run: str, table: str):
        t = pd.read_csv(ROOT / "results" / "runs" / run / "tables" / "reproduce_summary.csv")
        return t[(t.table == table) & (t.claims_checked == "either run's claims")].iloc[0]

    from ardlab.analysis.versus_study import study_runs

    assert "Speedup claims replicated once per comparison (direction, verdict):" in text
    pattern = r"`([\w.-]+)` twice (\d+ of \d+), (\d+)"
    said = {m[0]: m[1:] for m in re.findall(pattern, text)}
    for a, b in study_runs(ROOT)[1]:
        c = row(b.name, "speedup claims, once per comparison")
        assert said.get(a.name) == (f"{c.same_direction} of {c.claims}", str(c.same_significant_verdict)), a.name
    r = row("reference-b", "all")
    same = r.same_significant_verdict
    assert f"{same} of the {r.claims} claims significant in either run have the same verdict" in text
