"""The exceptions of polydom's features: a bad image, whatever form it came in.

Each derives from :class:`polydom.PolydomError` and keeps the built-in base that describes the
failure, so ``except ValueError`` (or ``FileNotFoundError``, ``TypeError``) still catches it. The
message names the item (``image (item 3): ...``).
"""

from polydom.lattice.errors import PolydomError

__all__ = ["ImageError", "ImageTypeError", "ImageNotFoundError", "ImageTooLargeError"]


class ImageError(PolydomError, ValueError):
    """An image the features cannot use: not an image, damaged, the wrong shape or values."""


class ImageTypeError(PolydomError, TypeError):
    """An item that is not an image at all (a dtype or type polydom does not read)."""


class ImageNotFoundError(PolydomError, FileNotFoundError):
    """A path that names no file."""


class ImageTooLargeError(ImageError):
    """An encoded image whose header claims more pixels than the pixel limit
    (:func:`polydom.set_pixel_limit`): refused before anything is decoded."""
