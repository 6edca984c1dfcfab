"""reconguard.stats against statsmodels (OLS with HC2, Beta regression) and closed forms (Wilson)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from reconguard.errors import ParameterError
from reconguard.stats import beta_regression, cost_of_privacy, ols, treatment_effect, wilson_interval

sm = pytest.importorskip("statsmodels.api")


@pytest.fixture(scope="module")
def table():
    """A fixed table shaped like the paper's: leakage on test accuracy and three robust accuracies."""
    rng = np.random.default_rng(7)
    n = 18
    X = np.column_stack([rng.uniform(0.85, 0.97, n), rng.uniform(0, 0.6, n), rng.uniform(0.2, 0.9, n),
                         rng.uniform(0.6, 1.0, n)])
    eta = -4 + 1.0 * X[:, 0] + 3.0 * X[:, 1] + 1.5 * X[:, 2] + 1.0 * X[:, 3]
    mu = 1 / (1 + np.exp(-eta))
    y = rng.beta(mu * 40, (1 - mu) * 40)
    return y, X


@pytest.mark.parametrize("cov", ["HC2", "HC0", "HC3", "nonrobust"])
def test_ols_equals_statsmodels(table, cov):
    y, X = table
    ours = ols(y, X, cov)
    ref = sm.OLS(y, sm.add_constant(X)).fit(cov_type=cov, use_t=True)
    np.testing.assert_allclose(ours.params, ref.params, rtol=1e-10)
    np.testing.assert_allclose(ours.bse, ref.bse, rtol=1e-10)
    np.testing.assert_allclose(ours.pvalues, ref.pvalues, rtol=1e-8)
    np.testing.assert_allclose(ours.conf_int(), ref.conf_int(), rtol=1e-10)
    assert ours.rsquared == pytest.approx(ref.rsquared, rel=1e-12)
    assert ours.rsquared_adj == pytest.approx(ref.rsquared_adj, rel=1e-12)
    # the paper's small-sample critical value: t_{0.975, n − p}
    half = ours.ci[:, 1] - ours.params
    np.testing.assert_allclose(half, sps.t.ppf(0.975, len(y) - 5) * ours.bse, rtol=1e-12)


def test_beta_regression_equals_statsmodels(table):
    from statsmodels.othermod.betareg import BetaModel

    y, X = table
    ours = beta_regression(y, X)
    ref = BetaModel(y, sm.add_constant(X)).fit(disp=0)
    np.testing.assert_allclose(ours.params, ref.params, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ours.bse, ref.bse, rtol=1e-3)
    assert ours.llf == pytest.approx(ref.llf, rel=1e-8)
    assert 0.5 < ours.pseudo_rsquared <= 1 and not ours.squeezed


def test_wilson_interval_closed_form():
    lo, hi = wilson_interval(42, 100)
    z = sps.norm.ppf(0.975)
    p, n = 0.42, 100
    c = (p + z * z / (2 * n)) / (1 + z * z / n)
    h = z / (1 + z * z / n) * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    assert (lo, hi) == pytest.approx((c - h, c + h), rel=1e-12)
    assert wilson_interval(0, 20)[0] == 0.0 and wilson_interval(20, 20)[1] == 1.0
    from statsmodels.stats.proportion import proportion_confint
    assert wilson_interval(7, 30) == pytest.approx(proportion_confint(7, 30, method="wilson"), rel=1e-10)
    with pytest.raises(ParameterError):
        wilson_interval(5, 3)


def test_treatment_effect_recovers_a_planted_effect():
    rng = np.random.default_rng(0)
    control = rng.beta(0.84 * 200, 0.16 * 200, 5)
    treated = rng.beta(0.065 * 200, 0.935 * 200, 5)
    te = treatment_effect(np.concatenate([control, treated]), [0] * 5 + [1] * 5)
    assert te.ols_ate == pytest.approx(treated.mean() - control.mean(), rel=1e-10)
    assert te.odds_ratio < 0.05 and te.odds_ratio_ci[1] < 1 and te.beta_p < 1e-6
    assert te.delta == pytest.approx(te.mu_treated - te.mu_control)
    assert te.delta_ci[0] < te.delta < te.delta_ci[1] < 0


def test_cost_of_privacy_delta_method(table):
    y, X = table
    fit = beta_regression(y, X, names=["test", "e1", "e2", "e3"])
    c = cost_of_privacy(fit, "e1")
    mu = fit.fitted.mean()
    b, se = fit.params[2], fit.bse[2]
    assert c.gamma == pytest.approx(1 / (b * mu * (1 - mu)))
    assert c.se == pytest.approx(se / (b ** 2 * mu * (1 - mu)))


def test_stats_errors():
    with pytest.raises(ParameterError, match="rank deficient"):
        ols([1, 2, 3, 4], np.ones((4, 1)))
    with pytest.raises(ParameterError, match=r"\[0, 1\]"):
        beta_regression([0.2, 1.5, 0.3, 0.4], [1, 2, 3, 4])
    with pytest.raises(ParameterError, match="observations"):
        ols([1, 2], [[1, 2], [3, 4]])


def test_stats_wrap_statsmodels_and_take_a_design_with_its_constant(table):
    """reconguard.stats imports statsmodels; ``ols(y, add_constant(X))`` works and equals ``ols(y, X)``."""
    import inspect

    import reconguard.stats.models as models

    assert "statsmodels" in inspect.getsource(models)
    y, X = table
    a, b = ols(y, X), ols(y, sm.add_constant(X))
    np.testing.assert_allclose(a.params, b.params, rtol=1e-12)
    assert b.names[0] == "const" and len(b.params) == X.shape[1] + 1
    from statsmodels.stats.proportion import proportion_confint
    lo, hi = wilson_interval(7, 20)
    assert (lo, hi) == pytest.approx(proportion_confint(7, 20, method="wilson"), rel=1e-12)


def test_treatment_effect_without_variation_is_a_clear_error():
    """Four units with one AttAcc per arm (a smoke run): statsmodels cannot invert the Hessian; that is one
    ParameterError the analysis reports, not a crash."""
    from reconguard.errors import ParameterError
    from reconguard.stats import treatment_effect

    with pytest.raises(ParameterError, match="Beta regression"):
        treatment_effect([0.05, 0.05, 0.1, 0.1], [1, 1, 0, 0])
