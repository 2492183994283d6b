"""The exceptions of polydom's features: a bad image, whatever form it came in.

Each derives from :class:`polydom.PolydomError` and keeps the built-in base that describes the
failure, so ``except ValueError`` (or ``FileNotFoundError``, ``TypeError``) still catches it. The
message names the item (``image (item 3): ...``).
"""

from polydom.lattice.errors import PolydomError, PolydomWarning

__all__ = ["DecodeDeadline", "ImageError", "ImageTypeError", "ImageNotFoundError", "ImageTooLargeError",
           "FeatureError", "UnknownFeatureError", "FeatureSourceError", "CostMeasurementWarning"]


class DecodeDeadline(PolydomError):
    """A decode given a deadline passed it (:func:`polydom.featurizers.sources.decode_image`):
    serving then answers without the pixels, on time. Raised between polydom's own parts."""


class ImageError(PolydomError, ValueError):
    """An image the features cannot use: not an image, damaged, the wrong shape or values."""


class ImageTypeError(PolydomError, TypeError):
    """An item that is not an image at all (a dtype or type polydom does not read)."""


class ImageNotFoundError(PolydomError, FileNotFoundError):
    """A path that names no file."""


class ImageTooLargeError(ImageError):
    """An encoded image whose header claims more pixels than the pixel limit
    (:func:`polydom.set_pixel_limit`): refused before anything is decoded."""


class FeatureSourceError(PolydomError, ValueError):
    """A saved feature's code cannot be used: its module is not trusted, cannot be imported, does
    not define it, or its source changed since the index was saved."""


class FeatureError(PolydomError, ValueError):
    """A feature function failed, or returned something that is not a valid
    feature vector.

    Attributes
    ----------
    feature : str
        Name of the feature.
    index : int or None
        Index of the item, when the caller gave one.
    """

    def __init__(self, message: str, *, feature: str, index=None):
        super().__init__(message)
        self.feature = feature
        self.index = index

    def __reduce__(self):
        # The keyword-only arguments are not in ``args``: without this, unpickling (a feature that
        # failed in a joblib worker) raises TypeError instead of re-raising this error.
        return (_rebuild_feature_error, (type(self), str(self), self.feature, self.index))


def _rebuild_feature_error(cls, message, feature, index):
    return cls(message, feature=feature, index=index)


class UnknownFeatureError(PolydomError, KeyError, ValueError):
    """No feature of that name is registered.

    It is both a `KeyError` (a failed look-up) and a `ValueError` (a bad
    argument), so either ``except`` clause catches it.
    """

    __str__ = Exception.__str__  # KeyError would quote the whole message


class CostMeasurementWarning(PolydomWarning):
    """The machine looked contended or unstable while the features were timed."""
