"""Fold scores of the default LDA learner without scikit-learn's per-fit overhead.

A build scores thousands of feature sets on every fold, many of them with the default
``"lda"`` learner (:func:`polydom.classifier.learners.default_learners`): standard scaling,
then :class:`~sklearn.discriminant_analysis.LinearDiscriminantAnalysis` with
``solver="lsqr", shrinkage="auto"``. Fitted through scikit-learn, input validation dominates
small sets and the ``p x p`` least-squares solve large ones (the measurements:
``docs/decisions/fast-fold-scores.md``).

:func:`fold_predictions` computes the same predictions from the same formulas, in numpy alone:

* the pipeline's scaling (mean and standard deviation of the training rows, a constant column
  scaled by 1, as :class:`~sklearn.preprocessing.StandardScaler` decides it);
* per class, the Ledoit-Wolf shrinkage of the class's standardised rows and their covariance
  shrunk towards a scaled identity, rescaled, weighed by the class's share of the rows;
* the linear system ``cov @ W = means.T``. The weighted covariance is a low-rank part (one row
  per training item) plus a diagonal, so when the columns outnumber the rows it is solved
  through the Woodbury identity on an ``n x n`` system instead of the ``p x p`` one.

The model a lookup serves is still scikit-learn's, refitted on every row: only the fold
scores take this path. Predictions agree with scikit-learn's wherever the two decision values
are not within rounding of a tie (``tests/polydom/test_fastlda.py`` checks both, and a whole
build's scores, against scikit-learn). Anything else -- another learner or setting, one
column, a class with one row, a non-positive diagonal -- returns None and the caller fits
scikit-learn's estimator as before.
"""

from __future__ import annotations

import numpy as np

__all__ = ["is_default_lda", "fold_predictions"]


def is_default_lda(model) -> bool:
    """Whether ``model`` is ``make_pipeline(StandardScaler(), LinearDiscriminantAnalysis(
    solver="lsqr", shrinkage="auto"))`` with the other settings at their defaults that matter
    to its predictions (no priors, no covariance estimator, centring and scaling on)."""
    from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import StandardScaler

    if type(model) is not Pipeline or len(model.steps) != 2:
        return False
    scaler, lda = model.steps[0][1], model.steps[1][1]
    return (type(scaler) is StandardScaler and scaler.with_mean and scaler.with_std
            and type(lda) is LinearDiscriminantAnalysis and lda.solver == "lsqr"
            and isinstance(lda.shrinkage, str) and lda.shrinkage == "auto"
            and lda.priors is None and lda.covariance_estimator is None)


def _scaled(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(mean, scale)`` as StandardScaler fits them: a column whose variance is within rounding
    of zero (scikit-learn's ``_is_constant_feature`` bound) is scaled by 1."""
    n = X.shape[0]
    mean = X.mean(axis=0)
    var = X.var(axis=0)
    eps = np.finfo(np.float64).eps
    constant = var <= n * eps * var + (n * mean * eps) ** 2
    scale = np.sqrt(var)
    scale[constant] = 1.0
    return mean, scale


def _ledoit_wolf(Z: np.ndarray) -> tuple[float, float]:
    """``(shrinkage, mu)`` of Ledoit and Wolf for centred rows ``Z`` (n x p): the weight of the
    scaled identity ``mu * I`` (``mu`` the mean variance) in the shrunk covariance, computed
    from the ``n x n`` Gram matrix instead of the ``p x p`` covariance."""
    n, p = Z.shape
    Z2 = Z * Z
    trace_terms = Z2.sum(axis=0) / n
    mu = float(trace_terms.sum()) / p
    row_sums = Z2.sum(axis=1)
    beta_ = float(row_sums @ row_sums)  # the sum of every entry of Z2.T @ Z2
    gram = Z @ Z.T
    delta_ = float(np.sum(gram * gram)) / n**2  # ||Z.T @ Z||_F^2 = ||Z @ Z.T||_F^2
    beta = (beta_ / n - delta_) / (p * n)
    delta = (delta_ - 2.0 * mu * float(trace_terms.sum()) + p * mu**2) / p
    beta = min(beta, delta)
    return (0.0 if beta == 0 else beta / delta), mu


def _solve(low_rank: np.ndarray, diagonal: np.ndarray, B: np.ndarray) -> np.ndarray:
    """``(low_rank.T @ low_rank + diag(diagonal))^-1 @ B`` for positive ``diagonal``: directly
    when the columns are at most the rows, else by the Woodbury identity on the rows."""
    from scipy.linalg import solve

    n, p = low_rank.shape
    if p <= n:
        cov = low_rank.T @ low_rank
        cov[np.diag_indices(p)] += diagonal
        return solve(cov, B, assume_a="pos")
    scaled_b = B / diagonal[:, None]
    scaled_u = low_rank / diagonal[None, :]
    inner = low_rank @ scaled_u.T
    inner[np.diag_indices(n)] += 1.0
    return scaled_b - scaled_u.T @ solve(inner, low_rank @ scaled_b, assume_a="pos")


def fold_predictions(X_train: np.ndarray, y_train: np.ndarray, X_test: np.ndarray) -> np.ndarray | None:
    """What the default LDA pipeline (:func:`is_default_lda`) fitted on ``(X_train, y_train)``
    predicts for ``X_test``; None where this path does not apply (see the module's docstring).
    """
    X_train = np.asarray(X_train, dtype=np.float64)
    n, p = X_train.shape
    if p < 2 or np.asarray(y_train).ndim != 1:
        return None
    classes, codes = np.unique(y_train, return_inverse=True)
    counts = np.bincount(codes)
    if len(classes) < 2 or counts.min() < 2:
        return None
    mean, scale = _scaled(X_train)
    Xs = (X_train - mean) / scale
    priors = counts / n
    means = np.zeros((len(classes), p))
    blocks, diagonal = [], np.zeros(p)
    for c in range(len(classes)):
        rows = Xs[codes == c]
        class_mean, class_scale = _scaled(rows)
        means[c] = class_mean
        Z = (rows - class_mean) / class_scale
        Z -= Z.mean(axis=0)  # LedoitWolf centres again
        shrinkage, mu = _ledoit_wolf(Z)
        # priors * scale * ((1 - s) Z.T Z / n_c + s mu I) * scale, as a low-rank block and a diagonal
        blocks.append(Z * class_scale * np.sqrt(priors[c] * (1.0 - shrinkage) / counts[c]))
        diagonal += priors[c] * shrinkage * mu * class_scale**2
    if not (np.all(diagonal > 0) and np.all(np.isfinite(diagonal))):
        return None
    W = _solve(np.vstack(blocks), diagonal, means.T)  # p x K
    intercept = -0.5 * np.einsum("kp,pk->k", means, W) + np.log(priors)
    scores = ((np.asarray(X_test, dtype=np.float64) - mean) / scale) @ W + intercept
    if len(classes) == 2:
        return classes[(scores[:, 1] - scores[:, 0] > 0).astype(int)]
    return classes[np.argmax(scores, axis=1)]
