"""Randomized sensitive-QID releases (spec sensitive-qid-diversity.md §3–§4): the spec's test vectors, the
guarantees checked on expanded tables with the repository's diversity measures, and the sampler's
distribution (fixed seeds; bounds at five standard deviations or a chi-square tail of 1e-6)."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from anonymizers import sensitive_qid
from anonymizers.diversity import emd, entropy_l, frequency_l_per_attribute
from anonymizers.errors import AnonymizationError
from anonymizers.sensitive_qid import (
    AttributeRelease,
    _kappas,
    _uniform_below,
    closeness_parameters,
    diversity_parameters,
    encode,
    expand,
    expected_l2,
    plan_attribute,
    posterior,
    randomize,
    randomize_attribute,
    verify_release,
    worst_case_emd,
)

A = np.array([0.4, 0.3, 0.15, 0.1, 0.05])  # the distribution of TV-SQ-4 and TV-SQ-5
CHI2_TAIL = 1e-6


def release(d: int, *, p: float = 1.0, eta: int = 2, name: str = "s", **extra: object) -> AttributeRelease:
    model = extra.pop("model", "frequency" if "t" not in extra else "closeness")
    if model == "frequency" and "l" not in extra:
        extra["l"] = eta
    return AttributeRelease(name, tuple(f"v{i}" for i in range(d)), p, eta, model, **extra)  # type: ignore[arg-type]


def tv(prior: np.ndarray, other: np.ndarray) -> float:
    return float(emd(other[None, :], prior, distance="equal")[0])


def five_sigma(probability: float, trials: int) -> float:
    return 5 * math.sqrt(probability * (1 - probability) / trials)


# ---- spec test vectors ----------------------------------------------------------------------------------


def test_tv_sq_3_expected_l2() -> None:
    assert expected_l2(1000, 5, 1.0, 2) == pytest.approx(0.0365148, abs=5e-8)
    assert expected_l2(45222, 10, 0.6, 3) == pytest.approx(0.0139044, abs=5e-8)


def test_expected_l2_matches_the_printed_form_of_eq_9() -> None:
    for n, d, p, eta in itertools.product((10, 1000), (2, 5, 18), (0.1, 0.6, 1.0), (1, 2, 4)):
        if eta >= d:
            continue
        printed = (1 - d) * (p * p * d + eta - (p * p + d) * eta) / (p * p * d * n * (d - eta))
        assert expected_l2(n, d, p, eta) == pytest.approx(math.sqrt(printed), rel=1e-12)


def test_expected_l2_derivatives_match_eqs_10_and_11() -> None:
    """The spec checked eqs. 10–11 at d = 7, p = 0.6, η = 3, N = 1000: 0.0314756 and −0.179861."""
    h = 1e-6
    by_eta = (expected_l2(1000, 7, 0.6, 3 + h) - expected_l2(1000, 7, 0.6, 3 - h)) / (2 * h)  # type: ignore[arg-type]
    by_p = (expected_l2(1000, 7, 0.6 + h, 3) - expected_l2(1000, 7, 0.6 - h, 3)) / (2 * h)
    assert by_eta == pytest.approx(0.0314756, abs=5e-7)
    assert by_p == pytest.approx(-0.179861, abs=5e-6)


def test_expected_l2_is_monotone_theorem_1() -> None:
    d, n = 12, 500
    grid = np.linspace(0.05, 1.0, 20)
    table = np.array([[expected_l2(n, d, p, eta) for eta in range(1, d)] for p in grid])
    assert (np.diff(table, axis=1) >= -1e-15).all()  # increasing in η
    assert (np.diff(table, axis=0) <= 1e-15).all()  # decreasing in p


def test_expected_l2_of_uninformative_releases_is_infinite() -> None:
    assert expected_l2(100, 5, 1.0, 5) == math.inf
    assert expected_l2(100, 5, 0.0, 2) == math.inf
    assert expected_l2(100, 5, 1.0, 1) == 0.0
    assert expected_l2(100, 1, 1.0, 1) == 0.0


def test_tv_sq_4_kappas_posterior_and_tv() -> None:
    kappa_c, kappa_d = _kappas(5, 0.5, 2)
    assert release(5, p=0.5, eta=2).p_contains == pytest.approx(0.7)
    assert (kappa_c, kappa_d) == pytest.approx((0.175, 0.05))
    b = posterior(A, [0, 1], 0.5, 2)
    assert b == pytest.approx([0.509091, 0.381818, 0.054545, 0.036364, 0.018182], abs=5e-7)
    assert tv(A, b) == pytest.approx(0.190909, abs=5e-7)
    a = 0.7  # TV(a) of §4.3
    assert tv(A, b) == pytest.approx(a * (1 - a) * (kappa_c - kappa_d) / (kappa_d + a * (kappa_c - kappa_d)))


def test_kappas_coincide_without_a_head() -> None:
    kappa_c, kappa_d = _kappas(7, 0.0, 3)
    assert kappa_c == pytest.approx(kappa_d)


@pytest.mark.parametrize(
    ("eta", "p", "error"),
    [(1, 0.090909, 0.30984), (2, 0.164948, 0.27858), (3, 0.228571, 0.30179), (4, 0.307692, 0.36661)],
)
def test_tv_sq_5_largest_p_per_eta(eta: int, p: float, error: float) -> None:
    found, chosen, worst, l2 = closeness_parameters(A, 1000, 0.1, min_eta=eta, max_eta=eta)
    assert chosen == eta
    assert found == pytest.approx(p, abs=5e-7)
    assert l2 == pytest.approx(error, abs=5e-6)
    assert worst <= 0.1
    assert worst == pytest.approx(0.1, abs=1e-9)  # the bisection stops at the bound


def test_tv_sq_5_chooses_the_smallest_expected_error() -> None:
    p, eta, worst, error = closeness_parameters(A, 1000, 0.1)
    assert (round(p, 6), eta) == (0.164948, 2)
    assert error == pytest.approx(0.27858, abs=5e-6)
    assert worst <= 0.1


def test_tv_sq_5_worst_case_at_p_1() -> None:
    assert [worst_case_emd(A, 1.0, eta) for eta in (1, 2, 3)] == pytest.approx([0.95, 0.85, 0.70])


def test_tv_sq_2_alice_expands_into_eight_rows() -> None:
    """Alice (41, 10105, HIV), l = (2, 2, 2), R = ({33, 41}, {10105, 32515}, {Cold, HIV}) — [S] Table III."""
    ages, addresses, diseases = ("33", "41", "50"), ("10105", "32515", "40000"), ("Cold", "HIV", "Flu")
    published = [np.array([[0, 1]]), np.array([[0, 1]]), np.array([[0, 1]])]
    rows, records = expand(published)
    decoded = [(ages[a], addresses[b], diseases[c]) for a, b, c in rows]
    assert len(decoded) == 8 and records.tolist() == [0] * 8
    assert decoded[5] == ("41", "10105", "HIV")  # row 6 is the true one
    assert decoded[4] == ("41", "10105", "Cold")  # row 5 differs only in disease
    # knowing age and address leaves the disease at confidence 1/2
    same_class = [row for row in decoded if row[:2] == ("41", "10105")]
    assert sorted(row[2] for row in same_class) == ["Cold", "HIV"]
    assert frequency_l_per_attribute(rows, np.ones(len(rows))).tolist() == [2.0, 2.0, 2.0]


# ---- parameters and refusals ----------------------------------------------------------------------------


def test_diversity_parameters_publish_l_values_with_the_true_one() -> None:
    assert diversity_parameters(5, 3) == (1.0, 3)
    assert diversity_parameters(3, 3) == (1.0, 3)  # the whole domain: diverse, uninformative


def test_domain_smaller_than_l_is_refused_with_a_hint() -> None:
    with pytest.raises(AnonymizationError, match="domain has 2 values, fewer than l = 3") as caught:
        diversity_parameters(2, 3)
    assert caught.value.hint is not None and "lower l" in caught.value.hint


@pytest.mark.parametrize("l", [0, -1, 2.5])
def test_l_must_be_a_whole_number_of_at_least_one(l: float) -> None:  # noqa: E741
    with pytest.raises(AnonymizationError, match="whole number of at least 1"):
        diversity_parameters(5, l)  # type: ignore[arg-type]


@pytest.mark.parametrize("t", [0.0, -0.1, 1.5, math.nan])
def test_t_outside_zero_one_is_refused(t: float) -> None:
    with pytest.raises(AnonymizationError, match=r"t must be greater than 0 and at most 1"):
        closeness_parameters(A, 1000, t)


def test_closeness_refuses_a_distribution_that_does_not_sum_to_one() -> None:
    with pytest.raises(AnonymizationError, match="sum to 1"):
        closeness_parameters(np.array([0.5, 0.4]), 10, 0.2)


def test_closeness_refuses_l_above_the_domain_and_inverted_eta_bounds() -> None:
    with pytest.raises(AnonymizationError, match="fewer than l = 6"):
        closeness_parameters(A, 1000, 0.1, min_eta=6)
    with pytest.raises(AnonymizationError, match="max_eta = 2 is smaller than min_eta = 3"):
        closeness_parameters(A, 1000, 0.1, min_eta=3, max_eta=2)


def test_closeness_with_l_equal_to_the_domain_publishes_the_whole_domain() -> None:
    assert closeness_parameters(A, 1000, 0.1, min_eta=5) == (1.0, 5, 0.0, math.inf)


def test_closeness_starts_eta_at_l() -> None:
    p, eta, worst, _ = closeness_parameters(A, 1000, 0.1, min_eta=3)
    assert eta >= 3 and worst <= 0.1 and p > 0


def test_unknown_value_is_refused_by_encode() -> None:
    with pytest.raises(AnonymizationError, match=r"'job': 2 values are not in the public domain \('pilot'\)"):
        encode(["clerk", "pilot", "pilot"], ("clerk", "nurse"), attribute="job")


def test_nulls_are_refused_by_encode() -> None:
    with pytest.raises(AnonymizationError, match="1 nulls"):
        encode(["clerk", None], ("clerk", "nurse"), attribute="job")


def test_encode_returns_indices_into_the_domain() -> None:
    codes = encode([30, 20, 30], ("20", "30"), attribute="age")
    assert codes.tolist() == [1, 0, 1] and codes.dtype == np.uint8


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"eta": 6}, "eta must be between 1 and the domain size 5"),
        ({"p": 1.5}, "p must be between 0 and 1"),
        ({"model": "kanon"}, "unknown model"),
        ({"l": 3}, "eta = 2 is smaller than l = 3"),
        ({"model": "closeness", "l": None}, "t must be greater than 0"),
    ],
)
def test_inconsistent_release_is_refused(changes: dict[str, object], message: str) -> None:
    fields = {"attribute": "s", "domain": tuple("abcde"), "p": 1.0, "eta": 2, "model": "frequency", "l": 2}
    with pytest.raises(AnonymizationError, match=message):
        AttributeRelease(**{**fields, **changes})  # type: ignore[arg-type]


def test_duplicate_domain_values_are_refused() -> None:
    with pytest.raises(AnonymizationError, match="lists a value twice"):
        AttributeRelease("s", ("a", "a"), 1.0, 1, "frequency", l=1)


def test_metadata_round_trips_through_json() -> None:
    closeness = release(5, p=0.2, eta=2, t=0.1, achieved_emd=0.09, expected_l2=0.3, distance="ordered")
    whole = release(3, eta=3, l=3, expected_l2=math.inf)
    for entry in (closeness, whole):
        text = json.dumps(entry.to_metadata(), allow_nan=False)
        assert AttributeRelease.from_metadata(json.loads(text)) == entry
    with pytest.raises(AnonymizationError, match="malformed release metadata"):
        AttributeRelease.from_metadata({"attribute": "s"})


def test_plan_attribute_picks_parameters_per_model() -> None:
    rng = np.random.default_rng(4)
    codes = rng.choice(5, size=1000, p=A).astype(np.uint8)
    domain = tuple("abcde")
    frequency = plan_attribute("s", domain, codes, l=3)
    assert (frequency.p, frequency.eta, frequency.model) == (1.0, 3, "frequency")
    assert frequency.expected_l2 == pytest.approx(expected_l2(1000, 5, 1.0, 3))
    closeness = plan_attribute("s", domain, codes, t=0.1)
    prior = np.bincount(codes, minlength=5) / 1000
    assert (
        closeness.p,
        closeness.eta,
        closeness.achieved_emd,
        closeness.expected_l2,
    ) == closeness_parameters(prior, 1000, 0.1)
    both = plan_attribute("s", domain, codes, l=3, t=0.1)
    assert both.model == "frequency+closeness" and both.eta >= 3
    plain = plan_attribute("s", domain, codes, l=1)  # a non-sensitive QID is published as it is
    assert (plain.p, plain.eta) == (1.0, 1)
    assert randomize_attribute(codes, plain, rng)[:, 0].tolist() == codes.tolist()
    with pytest.raises(AnonymizationError, match="give l, t or both"):
        plan_attribute("s", domain, codes)


# ---- worst case over published sets ---------------------------------------------------------------------


@pytest.mark.parametrize("distance", ["equal", "ordered"])
def test_worst_case_equals_the_brute_force_maximum_over_all_sets(distance: str) -> None:
    prior = np.array([0.35, 0.25, 0.2, 0.1, 0.06, 0.04, 0.0])
    for eta, p in itertools.product((1, 2, 3, 5, 6), (0.0, 0.2, 0.7, 1.0)):
        brute = 0.0
        for subset in itertools.combinations(range(prior.size), eta):
            if p == 1.0 and prior[list(subset)].sum() == 0:
                continue  # never published
            b = posterior(prior, subset, p, eta)
            brute = max(brute, float(emd(b[None, :], prior, distance=distance)[0]))  # type: ignore[arg-type]
        assert worst_case_emd(prior, p, eta, distance=distance) == pytest.approx(brute, abs=1e-12)  # type: ignore[arg-type]


def test_worst_case_is_non_decreasing_in_p() -> None:
    prior = np.random.default_rng(2).dirichlet(np.ones(9))
    for eta in range(1, 9):
        values = [worst_case_emd(prior, p, eta) for p in np.linspace(0, 1, 101)]
        assert (np.diff(values) >= -1e-15).all()


def test_relaxation_is_safe_and_slightly_conservative(monkeypatch: pytest.MonkeyPatch) -> None:
    prior = np.random.default_rng(3).dirichlet(np.ones(10) * 0.7)
    exact = [worst_case_emd(prior, p, eta) for p in (0.1, 0.5, 0.9, 1.0) for eta in (1, 3, 6)]
    exact_p = closeness_parameters(prior, 1000, 0.15, max_eta=4)
    monkeypatch.setattr(sensitive_qid, "EXACT_SUBSETS_LIMIT", 0)
    relaxed = [worst_case_emd(prior, p, eta) for p in (0.1, 0.5, 0.9, 1.0) for eta in (1, 3, 6)]
    assert all(r >= e - 1e-12 for r, e in zip(relaxed, exact, strict=True))
    assert max(r - e for r, e in zip(relaxed, exact, strict=True)) > 0  # the relaxation is in use
    relaxed_p = closeness_parameters(prior, 1000, 0.15, max_eta=4)
    assert relaxed_p[2] <= 0.15 and relaxed_p[3] >= exact_p[3] - 1e-12


def test_posterior_of_a_set_that_is_never_published_is_refused() -> None:
    with pytest.raises(AnonymizationError, match="never published"):
        posterior(np.array([0.5, 0.5, 0.0]), [2], 1.0, 1)


# ---- the sampler ----------------------------------------------------------------------------------------


def test_published_sets_are_sorted_distinct_and_in_domain() -> None:
    rng = np.random.default_rng(11)
    domains = (2, 5, 18, 256, 300)
    releases = [
        release(d, p=p, eta=eta)
        for d, p, eta in zip(domains, (1.0, 0.4, 0.7, 0.6, 0.5), (2, 3, 9, 4, 12), strict=True)
    ]
    codes = np.stack([rng.integers(0, d, 5000) for d in domains], axis=1)
    for array, rel in zip(randomize(codes, releases, rng), releases, strict=True):
        assert array.shape == (5000, rel.eta)
        assert array.min() >= 0 and array.max() < rel.d
        assert (np.diff(array.astype(np.int64), axis=1) > 0).all()


def test_with_p_one_every_set_contains_the_true_value() -> None:
    rng = np.random.default_rng(12)
    codes = rng.integers(0, 7, size=(20000, 3))
    published = randomize(codes, [release(7, eta=eta) for eta in (1, 3, 6)], rng)
    for j, array in enumerate(published):
        assert (array == codes[:, j : j + 1]).any(axis=1).all()
    assert published[0][:, 0].tolist() == codes[:, 0].tolist()


def test_columns_and_matrix_inputs_draw_the_same_release() -> None:
    codes = np.random.default_rng(13).integers(0, 6, size=(1000, 10))
    releases = [release(6, eta=3) for _ in range(10)]
    from_matrix = randomize(codes, releases, np.random.default_rng(5))
    from_columns = randomize(list(codes.T), releases, np.random.default_rng(5))
    assert all(np.array_equal(x, y) for x, y in zip(from_matrix, from_columns, strict=True))


def test_true_value_is_published_with_probability_p_contains() -> None:
    """P(true ∈ set) = p + (1 − p)·η/d and P(a given other value ∈ set) = F_other (§5.2)."""
    rng = np.random.default_rng(21)
    n, rel = 200_000, release(10, p=0.3, eta=3)
    codes = rng.integers(0, 10, n)
    array = randomize_attribute(codes, rel, rng)
    contains = (array == codes[:, None]).any(axis=1).mean()
    assert abs(contains - rel.p_contains) < five_sigma(rel.p_contains, n)
    other = (codes + 1) % 10
    other_rate = (array == other[:, None]).any(axis=1).mean()
    assert abs(other_rate - rel.p_other) < five_sigma(rel.p_other, n)


def test_tail_sets_are_uniform_over_all_subsets() -> None:
    rng = np.random.default_rng(22)
    n = 100_000
    array = randomize_attribute(np.zeros(n, dtype=np.int64), release(5, p=0.0, eta=2), rng)
    _, counts = np.unique(array, axis=0, return_counts=True)
    assert counts.size == 10
    statistic = stats.chisquare(counts).statistic
    assert statistic < stats.chi2.isf(CHI2_TAIL, counts.size - 1)


def test_head_sets_draw_the_other_values_uniformly() -> None:
    rng = np.random.default_rng(23)
    n = 120_000
    codes = rng.integers(0, 6, n)
    array = randomize_attribute(codes, release(6, p=1.0, eta=3), rng)
    statistic, cells = 0.0, 0
    for value in range(6):
        rows = array[codes == value]
        _, counts = np.unique(rows, axis=0, return_counts=True)
        assert counts.size == math.comb(5, 2)  # every pair of others appears with the true value
        statistic += stats.chisquare(counts).statistic
        cells += counts.size - 1
    assert statistic < stats.chi2.isf(CHI2_TAIL, cells)


@pytest.mark.parametrize("high", [1, 3, 17, 200, 256, 1000])
def test_uniform_draws_below_a_bound(high: int) -> None:
    draws = _uniform_below(high, 400_000, np.random.default_rng(24), np.dtype(np.uint16))
    counts = np.bincount(draws, minlength=high)
    assert counts.size == high
    if high > 1:
        assert stats.chisquare(counts).statistic < stats.chi2.isf(CHI2_TAIL, high - 1)


def test_randomize_refuses_codes_outside_the_domain() -> None:
    with pytest.raises(AnonymizationError, match=r"'s': codes must be whole numbers in \[0, 5\)"):
        randomize(np.array([[0], [5]]), [release(5)], np.random.default_rng(0))
    with pytest.raises(AnonymizationError, match="records × 2 attributes"):
        randomize(np.zeros((3, 1), dtype=int), [release(5), release(5)], np.random.default_rng(0))


# ---- guarantees on expanded tables (Def 10) -------------------------------------------------------------


def class_matrices(rows: np.ndarray, j: int) -> np.ndarray:
    """Classes for S_j (equal on the other attributes) × values of S_j, counted with pandas."""
    frame = pd.DataFrame(rows, columns=[f"s{i}" for i in range(rows.shape[1])])
    others = [f"s{i}" for i in range(rows.shape[1]) if i != j]
    return pd.crosstab([frame[c] for c in others], frame[f"s{j}"]).to_numpy()


def small_table(seed: int) -> tuple[np.ndarray, tuple[int, ...]]:
    rng = np.random.default_rng(seed)
    domains = (4, 6, 3)
    skew = [np.array([0.55, 0.25, 0.15, 0.05]), np.full(6, 1 / 6), np.array([0.7, 0.2, 0.1])]
    codes = np.stack([rng.choice(d, size=40, p=s) for d, s in zip(domains, skew, strict=True)], axis=1)
    return codes, domains


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_every_expanded_class_is_frequency_and_entropy_l_diverse(seed: int) -> None:
    codes, domains = small_table(seed)
    ls = (2, 3, 2)
    releases = [release(d, eta=level, l=level) for d, level in zip(domains, ls, strict=True)]
    published = randomize(codes, releases, np.random.default_rng(seed))
    rows, _ = expand(published)
    achieved = frequency_l_per_attribute(rows, np.ones(len(rows)))
    assert (achieved >= np.array(ls)).all()
    for j, level in enumerate(ls):
        assert entropy_l(class_matrices(rows, j)).min() >= level * (1 - 1e-12)
    verify_release(codes, published, releases)


def test_the_unrandomized_table_fails_the_same_check() -> None:
    """Negative control: the raw table (η = 1) is not (2, 3, 2)-diverse, so the check above can fail."""
    codes, _ = small_table(1)
    achieved = frequency_l_per_attribute(codes, np.ones(len(codes)))
    assert (achieved < np.array((2, 3, 2))).any()


def test_closeness_with_l_is_also_l_diverse_when_expanded() -> None:
    codes, domains = small_table(4)
    prior = [np.bincount(codes[:, j], minlength=d) / len(codes) for j, d in enumerate(domains)]
    releases = []
    for j, d in enumerate(domains):
        p, eta, worst, _ = closeness_parameters(prior[j], len(codes), 0.3, min_eta=2)
        releases.append(release(d, p=p, eta=eta, model="frequency+closeness", l=2, t=0.3, achieved_emd=worst))
    published = randomize(codes, releases, np.random.default_rng(4))
    rows, _ = expand(published)
    assert (frequency_l_per_attribute(rows, np.ones(len(rows))) >= 2).all()
    verify_release(codes, published, releases)


@pytest.mark.parametrize("distance", ["equal", "ordered"])
def test_every_single_record_posterior_is_t_close(distance: str) -> None:
    rng = np.random.default_rng(31)
    codes = rng.choice(8, size=5000, p=[0.3, 0.2, 0.15, 0.12, 0.1, 0.08, 0.04, 0.01]).astype(np.uint8)
    rel = plan_attribute("s", tuple("abcdefgh"), codes, t=0.15, distance=distance)  # type: ignore[arg-type]
    prior = np.bincount(codes, minlength=8) / codes.size
    array = randomize_attribute(codes, rel, rng)
    sets = np.unique(array, axis=0)
    assert len(sets) >= 8  # every value is published in some set
    worst = max(
        float(emd(posterior(prior, z, rel.p, rel.eta)[None, :], prior, distance=distance)[0]) for z in sets
    )  # type: ignore[arg-type]
    assert worst <= 0.15 + 1e-12
    verify_release(codes[:, None], [array], [rel])


# ---- verify_release refusals ----------------------------------------------------------------------------


def verified_pair() -> tuple[np.ndarray, list[np.ndarray], list[AttributeRelease]]:
    rng = np.random.default_rng(41)
    codes = rng.integers(0, 6, size=(300, 2))
    releases = [release(6, eta=3, l=3), release(6, eta=2, l=2)]
    return codes, randomize(codes, releases, rng), releases


def test_verify_accepts_an_honest_release() -> None:
    codes, published, releases = verified_pair()
    verify_release(codes, published, releases)


@pytest.mark.parametrize(
    ("tamper", "message"),
    [
        (lambda a, c: a.__setitem__((0, slice(None)), [1, 1, 2]), "repeats a value or is not sorted"),
        (lambda a, c: a.__setitem__((0, slice(None)), [3, 2, 1]), "repeats a value or is not sorted"),
        (lambda a, c: a.__setitem__((0, 2), 6), "outside the domain"),
        (
            lambda a, c: a.__setitem__((0, slice(None)), np.setdiff1d(np.arange(6), [c[0, 0]])[:3]),
            "misses the true value",
        ),
    ],
)
def test_verify_refuses_a_tampered_release(tamper: object, message: str) -> None:
    codes, published, releases = verified_pair()
    tamper(published[0], codes)  # type: ignore[operator]
    with pytest.raises(AnonymizationError, match=message):
        verify_release(codes, published, releases)


def test_verify_refuses_a_closeness_release_above_t() -> None:
    rng = np.random.default_rng(42)
    codes = rng.choice(5, size=(2000, 1), p=A)
    too_open = release(5, p=1.0, eta=2, t=0.1, achieved_emd=0.1)  # p = 1 reaches 0.85
    published = randomize(codes, [too_open], rng)
    with pytest.raises(AnonymizationError, match=r"worst-case posterior EMD 0\.8.* exceeds t = 0\.1"):
        verify_release(codes, published, [too_open])


def test_verify_refuses_mismatched_shapes() -> None:
    codes, published, releases = verified_pair()
    with pytest.raises(AnonymizationError, match="one published array per attribute"):
        verify_release(codes, published[:1], releases)
    with pytest.raises(AnonymizationError, match="expected 300 × 3 published codes"):
        verify_release(codes, [published[0][:, :2], published[1]], releases)
