"""Named features, the registry that holds them, and `compute_features`."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass

import numpy as np

from polydom.featurizers import image_features as _img
from .errors import FeatureError, UnknownFeatureError  # noqa: F401 - defined with the package's errors

__all__ = [
    "REGISTRY",
    "STEPS",
    "Feature",
    "FeatureError",
    "FeatureRegistry",
    "UnknownFeatureError",
    "compute_features",
    "default_features",
    "feature",
    "get_feature",
    "register_feature",
    "resolve_features",
    "Step",
    "step",
    "unregister_feature",
    "unregister_step",
    "with_steps",
]


@dataclass(frozen=True)
class Step:
    """A preparatory step that features share, such as converting an image to grey levels.

    A feature names the steps it needs in ``Feature.requires``; whoever computes several
    features of one image computes each step once and hands its output to every feature that
    needs it (as the keyword argument of the step's name). A step is timed and costed like a
    feature, so that a set of features pays for the union of their steps
    (``docs/decisions/shared-steps.md``). It adds no columns: its vector is empty.

    Parameters
    ----------
    name : str
        Unique, non-empty name.
    function : callable
        ``function(image) -> value``, deterministic; the value is what the features receive.
    description : str
        One line for people.
    does_work : callable, optional
        ``does_work(image) -> bool``: whether the step does real work on that (validated)
        image. A step that does none on any image of a collection (``grey`` on grey images: a
        cast) costs more as a timed call of its own than it saves; there each feature computes
        it itself (:func:`with_steps`). None: it always does.
    """

    name: str
    function: Callable[[np.ndarray], object]
    description: str = ""
    does_work: Callable[[np.ndarray], bool] | None = None

    #: A step adds no columns to a feature vector.
    dimension = 0
    requires = ()

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"step name must be a non-empty str, got {self.name!r}")
        if not callable(self.function):
            raise TypeError(f"step {self.name!r}: function is not callable")

    def prepare(self, image: np.ndarray, *, index=None):
        """The step's output for an already validated image.

        Raises
        ------
        FeatureError
            If the function fails, naming the step and the item.
        """
        try:
            return self.function(image)
        except Exception as exc:
            raise FeatureError(f"step {self.name!r} failed{_where(index)}: {type(exc).__name__}: {exc}",
                               feature=self.name, index=index) from exc

    def works_on(self, images) -> bool:
        """Whether the step does work on any of ``images`` (arrays), so that sharing it pays."""
        return self.does_work is None or any(self.does_work(np.asarray(image)) for image in images)

    def evaluate(self, image: np.ndarray, *, index=None, prepared: dict | None = None) -> np.ndarray:
        """Prepare ``image`` into ``prepared[name]`` (once: a value already there is kept) and
        return the step's empty vector, so that a step is computed where features are."""
        if prepared is None:
            self.prepare(image, index=index)
        elif prepared.get(self.name) is None:
            prepared[self.name] = self.prepare(image, index=index)
        return _NO_COLUMNS


_NO_COLUMNS = np.zeros(0)

#: The built-in steps, by name.
STEPS: dict[str, Step] = {
    "grey": Step("grey", _img.as_gray_float, "grey levels as float64 in [0, 1]", _img.is_colour),
}


@dataclass(frozen=True)
class Feature:
    """A named feature: a function from an image to a 1-D vector.

    Parameters
    ----------
    name : str
        Unique, non-empty name.
    function : callable
        ``function(image) -> array_like``; given any valid image (see
        `featurizers.validate_image`) it returns a 1-D vector whose length
        does not depend on the image, deterministically.
    description : str
        One line for people.
    dimension : int, optional
        Length of the vector, when known; calls check it.
    requires : tuple of str, optional
        Names of the :class:`Step` objects (in `STEPS`) whose outputs the function takes as
        keyword arguments: ``function(image, grey=...)``. Computed once per image for all the
        features that need them, and costed once per set.
    """

    name: str
    function: Callable[[np.ndarray], np.ndarray]
    description: str = ""
    dimension: int | None = None
    requires: tuple = ()

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"feature name must be a non-empty str, got {self.name!r}")
        if not callable(self.function):
            raise TypeError(f"feature {self.name!r}: function is not callable")
        if self.dimension is not None and (
            not isinstance(self.dimension, int) or self.dimension < 1
        ):
            raise ValueError(
                f"feature {self.name!r}: dimension must be a positive int, "
                f"got {self.dimension!r}"
            )
        requires = (self.requires,) if isinstance(self.requires, str) else tuple(self.requires)
        unknown = [n for n in requires if n not in STEPS]
        if unknown:
            raise ValueError(f"feature {self.name!r} requires unknown steps {unknown}; known steps: {', '.join(STEPS)}")
        object.__setattr__(self, "requires", requires)

    def __call__(self, image, *, index=None) -> np.ndarray:
        """Validate ``image`` and return this feature's vector for it.

        Raises
        ------
        TypeError, ValueError
            If the image is invalid (see `featurizers.validate_image`).
        FeatureError
            If the function fails or returns an invalid vector.
        """
        return _evaluate(self, _img.validate_image(image, index=index), index)

    def evaluate(self, image: np.ndarray, *, index=None, prepared: dict | None = None) -> np.ndarray:
        """Like calling the feature, for an image already checked by `featurizers.validate_image`.

        Skips the validation, which a caller computing several features of one image does once;
        the output is checked and errors are raised exactly as by ``__call__``. ``prepared``
        holds the outputs of the steps computed for this image so far (step name -> value); a
        required step missing from it is computed and added.
        """
        return _evaluate(self, image, index, prepared)


def _where(index) -> str:
    return "" if index is None else f" on item {index}"


def _evaluate(feature: Feature, image: np.ndarray, index, prepared: dict | None = None) -> np.ndarray:
    """Run ``feature`` on an already validated image, given its steps, and check its output."""
    prepared = {} if prepared is None else prepared
    steps = {}
    for name in feature.requires:
        STEPS[name].evaluate(image, index=index, prepared=prepared)
        steps[name] = prepared[name]
    try:
        vector = np.asarray(feature.function(image, **steps), dtype=np.float64)
    except Exception as exc:
        raise FeatureError(
            f"feature {feature.name!r} failed{_where(index)}: "
            f"{type(exc).__name__}: {exc}",
            feature=feature.name,
            index=index,
        ) from exc
    problem = None
    if vector.ndim != 1:
        problem = f"returned an array of shape {vector.shape}, not a 1-D vector"
    elif feature.dimension is not None and vector.shape[0] != feature.dimension:
        problem = f"returned {vector.shape[0]} values, not {feature.dimension}"
    elif not np.all(np.isfinite(vector)):
        problem = "returned non-finite values"
    if problem is not None:
        raise FeatureError(
            f"feature {feature.name!r}{_where(index)} {problem}",
            feature=feature.name,
            index=index,
        )
    return vector


class FeatureRegistry(Mapping):
    """An ordered mapping from feature name to `Feature`.

    Iteration follows registration order. Names are unique.
    """

    def __init__(self, features: Iterable[Feature] = ()):
        self._features: dict[str, Feature] = {}
        for feature in features:
            self.register(feature)

    def __getitem__(self, name: str) -> Feature:
        try:
            return self._features[name]
        except (KeyError, TypeError):
            known = ", ".join(self._features) or "none"
            raise UnknownFeatureError(
                f"unknown feature {name!r}; known features: {known}"
            ) from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._features)

    def __len__(self) -> int:
        return len(self._features)

    def __repr__(self) -> str:
        return f"FeatureRegistry({list(self._features)})"

    def register(self, feature: Feature, *, replace: bool = False) -> Feature:
        """Add ``feature``; refuse a taken name unless ``replace`` is true.

        Returns
        -------
        Feature
            The registered feature.
        """
        if not isinstance(feature, Feature):
            raise TypeError(f"expected a Feature, got {type(feature).__name__}")
        if feature.name in STEPS:
            raise ValueError(f"a step named {feature.name!r} is registered; a feature may not take its name")
        if feature.name in self._features and not replace:
            raise ValueError(
                f"a feature named {feature.name!r} is already registered "
                "(pass replace=True to replace it)"
            )
        self._features[feature.name] = feature
        return feature

    def unregister(self, name: str) -> Feature:
        """Remove and return the feature called ``name``.

        Raises
        ------
        UnknownFeatureError
            If there is none.
        """
        feature = self[name]
        del self._features[name]
        return feature

    def features(self) -> list[Feature]:
        """Return the registered features in registration order."""
        return list(self._features.values())

    def copy(self) -> FeatureRegistry:
        """Return an independent registry with the same features."""
        return FeatureRegistry(self._features.values())


_BUILTIN = (
    Feature("size_meta", _img.size_meta,
            "height, width and aspect ratio; constant time", 3),
    Feature("intensity_hist", _img.intensity_hist,
            "16-bin grey-level histogram", 16, ("grey",)),
    Feature("thumbnail", _img.thumbnail,
            "8 x 8 box-filtered thumbnail", 64, ("grey",)),
    Feature("fft_bands", _img.fft_bands,
            "spectral energy shares in 8 radial and 4 angular bands", 12, ("grey",)),
    Feature("edge_density", _img.edge_density,
            "Canny edge fraction on a 4 x 4 grid", 16, ("grey",)),
    Feature("lbp", _img.lbp_hist,
            "uniform LBP (P=8, R=1) histograms on a 2 x 2 grid", 40, ("grey",)),
    Feature("glcm", _img.glcm_stats,
            "Haralick statistics of the grey-level co-occurrence matrix", 12, ("grey",)),
    Feature("harris", _img.harris_corners,
            "Harris corner response on a 4 x 4 grid and corner density", 17, ("grey",)),
    Feature("hog", _img.hog_pooled,
            "HOG cell histograms pooled on a 4 x 4 grid", 144, ("grey",)),
    Feature("gabor", _img.gabor_energy,
            "Gabor filter bank energies on a 4 x 4 grid (GIST-like)", 128, ("grey",)),
)

#: The process-wide registry: the built-in features, then any registered
#: with `register_feature`.
REGISTRY = FeatureRegistry(_BUILTIN)


def default_features() -> list[Feature]:
    """Return the built-in features, roughly from cheapest to dearest.

    The list is new on each call and does not include features added with
    `register_feature`.
    """
    return list(_BUILTIN)


def get_feature(name: str, *, registry: FeatureRegistry | None = None) -> Feature:
    """Return the feature called ``name``.

    Raises
    ------
    UnknownFeatureError
        A `ValueError` (and `KeyError`) naming the unknown feature and the
        known ones.
    """
    return (REGISTRY if registry is None else registry)[name]


def register_feature(feature: Feature, *, replace: bool = False) -> Feature:
    """Add ``feature`` to `REGISTRY` (see `FeatureRegistry.register`)."""
    return REGISTRY.register(feature, replace=replace)


def feature(name: str | None = None, *, description: str = "", dimension: int | None = None, requires=()):
    """Register the decorated function as a feature of `REGISTRY`; the decorator returns the `Feature`.

    Parameters
    ----------
    name : str, optional
        Default: the function's name.
    description : str, optional
        Default: the first line of the function's docstring.
    dimension : int, optional
        The vector's length, checked on every call when given.
    requires : tuple of str, optional
        Steps of `STEPS` whose outputs the function takes as keyword arguments (``"grey"``: the
        image as float64 grey levels, computed once per image for every feature that needs it).

    A module that defines its features this way can be named by an index and imported by a fresh
    process that trusts it (``CostSensitiveClassifier.load(path, feature_modules=[...])``). Importing
    the module again (a reload) replaces its own features; a name another module took is refused.

    Examples
    --------
    >>> import numpy as np
    >>> from polydom.featurizers import feature, unregister_feature
    >>> @feature(dimension=1)
    ... def mean_brightness(image):
    ...     "Mean grey level."
    ...     return [np.mean(image)]
    >>> mean_brightness(np.full((8, 8), 0.5)).tolist(), mean_brightness.description
    ([0.5], 'Mean grey level.')
    >>> _ = unregister_feature("mean_brightness")
    """
    def register(function) -> Feature:
        made = Feature(name or function.__name__, function, description or _first_line(function), dimension,
                       requires)
        old = REGISTRY._features.get(made.name)
        return REGISTRY.register(made, replace=old is not None and _same_definition(old, function))

    return register


def step(name: str | None = None, *, description: str = "", does_work=None):
    """Register the decorated function as a :class:`Step` of `STEPS`; the decorator returns the step.

    A feature that names the step in ``requires`` receives its output as a keyword argument of
    the step's name, computed once per image for every feature of the set, and the set pays for
    it once (``docs/decisions/shared-steps.md``). Define the step before the features that need it.

    Parameters
    ----------
    name : str, optional
        Default: the function's name. It may be no feature's name.
    description : str, optional
        Default: the first line of the function's docstring.
    does_work : callable, optional
        ``does_work(image) -> bool``, see :class:`Step`; None: the step always does work.

    A module that defines steps this way travels with an index as a module of features does
    (``CostSensitiveClassifier.load(path, feature_modules=[...])``). Importing it again replaces
    its own steps; a name another module took is refused.

    Examples
    --------
    >>> import numpy as np
    >>> from polydom.featurizers import compute_features, feature, step, unregister_feature, unregister_step
    >>> @step()
    ... def brightness_map(image):
    ...     "The image's grey levels, doubled."
    ...     return 2.0 * np.asarray(image, dtype=float)
    >>> @feature(dimension=1, requires=("brightness_map",))
    ... def bright(image, brightness_map):
    ...     return [brightness_map.mean()]
    >>> compute_features(np.full((8, 8), 0.25), ["bright"])["bright"].tolist()
    [0.5]
    >>> _ = unregister_feature("bright"), unregister_step("brightness_map")
    """
    def register(function) -> Step:
        made = Step(name or function.__name__, function, description or _first_line(function), does_work)
        if made.name in REGISTRY:
            raise ValueError(f"a feature named {made.name!r} is registered; a step may not take its name")
        old = STEPS.get(made.name)
        if old is not None and not _same_definition(old, function):
            raise ValueError(f"a step named {made.name!r} is already registered")
        STEPS[made.name] = made
        return made

    return register


def _first_line(function) -> str:
    """The first line of ``function``'s docstring, or ``""``: a decorated item's default description."""
    doc = (function.__doc__ or "").strip().splitlines()
    return doc[0] if doc else ""


def _same_definition(old, function) -> bool:
    """Whether the registered ``old`` (a Feature or Step) was defined by ``function``'s module and
    name: a module imported again replaces its own items, never another module's."""
    return (getattr(old.function, "__module__", None), getattr(old.function, "__qualname__", None)) \
        == (function.__module__, function.__qualname__)


def unregister_step(name: str) -> Step:
    """Remove the step called ``name`` from `STEPS` and return it (``KeyError`` if there is none)."""
    return STEPS.pop(name)


def unregister_feature(name: str) -> Feature:
    """Remove the feature called ``name`` from `REGISTRY` and return it."""
    return REGISTRY.unregister(name)


def resolve_features(
    names, *, registry: FeatureRegistry | None = None
) -> list[Feature]:
    """Turn names and/or `Feature` objects into distinct features, in order.

    A single ``str`` or `Feature` counts as one. Duplicates (by name) are
    dropped after their first occurrence. Every name is resolved before the
    function returns, so an unknown name fails before any work is done.
    """
    if isinstance(names, (str, Feature)):
        names = [names]
    resolved: dict[str, Feature] = {}
    for entry in names:
        feature = entry if isinstance(entry, Feature) else get_feature(entry, registry=registry)
        resolved.setdefault(feature.name, feature)
    return list(resolved.values())


def with_steps(features, images=None) -> list:
    """The :class:`Step` objects ``features`` require (in `STEPS` order) and do not hold already,
    then ``features``: the items a fit times and a lattice holds, each step before the features
    that need it.

    With ``images``, only the steps that do work on at least one of them (:meth:`Step.works_on`):
    on grey images the ``grey`` step is a cast, cheaper inside each feature than as a timed call
    of its own (``docs/decisions/shared-steps.md``)."""
    features = list(features)
    needed = {name for f in features for name in f.requires} - {f.name for f in features}
    return [step for name, step in STEPS.items()
            if name in needed and (images is None or step.works_on(images))] + features


def compute_features(
    image, names, *, index=None, registry: FeatureRegistry | None = None
) -> dict[str, np.ndarray]:
    """Compute the named features of one image, and only those.

    Parameters
    ----------
    image : array_like
        A valid image (see `featurizers.validate_image`).
    names : str, Feature or iterable of them
        Features to compute; duplicates are computed once.
    index : int, optional
        Position of the image in a collection, named in errors.
    registry : FeatureRegistry, optional
        Where names are looked up; `REGISTRY` by default.

    Returns
    -------
    dict
        Feature name to 1-D ``float64`` vector, in the order asked.

    Raises
    ------
    UnknownFeatureError
        If a name is not registered; nothing is computed then.
    TypeError, ValueError
        If the image is invalid; nothing is computed then.
    FeatureError
        If a feature function fails or returns an invalid vector.
    """
    features = resolve_features(names, registry=registry)
    array = _img.validate_image(image, index=index)
    prepared: dict = {}  # each step once for all the features that need it
    return {feature.name: _evaluate(feature, array, index, prepared) for feature in features}
