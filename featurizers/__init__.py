"""Image features with very different costs, and a harness to time them.

The item size of an image is its pixel count ``n = H * W``; feature costs are
measured (`featurizers.timing.measure_costs`) as functions of ``n`` so that
polydom can bound them by polynomials in ``n``.
"""

from polydom.featurizers.image_features import MIN_SIDE, as_gray_float, item_size, validate_image
from polydom.featurizers.registry import (
    REGISTRY,
    STEPS,
    Feature,
    FeatureError,
    FeatureRegistry,
    UnknownFeatureError,
    compute_features,
    default_features,
    feature,
    get_feature,
    register_feature,
    resolve_features,
    Step,
    step,
    unregister_feature,
    unregister_step,
    with_steps,
)
from polydom.featurizers.timing import CostMeasurements, CostSamples, measure_costs, resize_square

__all__ = [
    "MIN_SIDE",
    "REGISTRY",
    "STEPS",
    "CostMeasurements",
    "CostSamples",
    "Feature",
    "FeatureError",
    "FeatureRegistry",
    "UnknownFeatureError",
    "as_gray_float",
    "compute_features",
    "default_features",
    "feature",
    "get_feature",
    "item_size",
    "measure_costs",
    "register_feature",
    "resize_square",
    "resolve_features",
    "Step",
    "step",
    "unregister_feature",
    "unregister_step",
    "validate_image",
    "with_steps",
]

