"""Images in the forms a service receives them: file paths, encoded bytes, PIL images and arrays.

A path or a bytes object is an *encoded* image: its size is read from the file's header, before
anything is decoded (:func:`header_shape`), and decoding is a step of its own whose time depends
on the size (:func:`decode_image`). A PIL image is decoded already; an array is what the
features compute on.

Every form decodes to the array ``np.asarray(Image.open(f).convert(mode))`` gives, with ``mode``
``"L"`` for grey images (modes 1, L, LA, I, I;16, F) and ``"RGB"`` otherwise, so a caller who
decodes the file itself gets the same array and the same answer.
"""

from __future__ import annotations

import io
import os

import numpy as np

from .image_features import validate_image

__all__ = ["is_encoded", "is_pil_image", "header_shape", "pixel_count", "decode_image", "as_array", "read_image_folder"]

#: PIL modes decoded to grey (``"L"``); every other mode decodes to ``"RGB"``.
_GREY_MODES = frozenset({"1", "L", "LA", "I", "I;16", "I;16B", "I;16L", "F"})

#: File names :func:`read_image_folder` reads.
IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".webp")


def _where(index) -> str:
    return "image" if index is None else f"image (item {index})"


def is_encoded(item) -> bool:
    """Whether ``item`` is a file path or encoded bytes (rather than pixels)."""
    return isinstance(item, (str, os.PathLike, bytes, bytearray, memoryview))


def is_pil_image(item) -> bool:
    """Whether ``item`` is a PIL image (checked without importing Pillow)."""
    return type(item).__module__.startswith("PIL.") and hasattr(item, "getbands")


def _open(item, index):
    from PIL import Image, UnidentifiedImageError

    where = _where(index)
    stream = io.BytesIO(bytes(item)) if isinstance(item, (bytes, bytearray, memoryview)) else item
    try:
        return Image.open(stream)
    except FileNotFoundError:
        raise FileNotFoundError(f"{where}: no file {os.fspath(item)!r}") from None
    except UnidentifiedImageError:
        what = f"file {os.fspath(item)!r}" if not isinstance(stream, io.BytesIO) else f"{len(bytes(item))} bytes"
        raise ValueError(f"{where}: {what} is not an image Pillow can read") from None
    except OSError as exc:
        raise ValueError(f"{where}: cannot read it as an image: {exc}") from None


def header_shape(item, *, index=None) -> tuple[int, int]:
    """``(height, width)`` of an encoded image from its header, without decoding the pixels."""
    with _open(item, index) as image:
        width, height = image.size
    return int(height), int(width)


def pixel_count(item, *, index=None) -> int:
    """The item size ``H * W`` of an array, or of an encoded image from its header (nothing decoded)."""
    height, width = header_shape(item, index=index) if is_encoded(item) else np.shape(item)[:2]
    return int(height) * int(width)


def _pixels(image) -> np.ndarray:
    if image.mode not in ("L", "RGB"):
        image = image.convert("L" if image.mode in _GREY_MODES else "RGB")
    return np.asarray(image)


def decode_image(item, *, index=None) -> np.ndarray:
    """The pixels of an encoded image (path or bytes), checked as the features need them.

    Raises
    ------
    FileNotFoundError
        No such file.
    ValueError
        Not an image Pillow can read, or one the features refuse (too small, ...).
    """
    with _open(item, index) as image:
        try:
            image.load()
        except OSError as exc:  # truncated or damaged data
            raise ValueError(f"{_where(index)}: cannot decode it: {exc}") from None
        return validate_image(_pixels(image), index=index)


def as_array(item, *, index=None) -> np.ndarray:
    """``item`` as a checked array: decoded when encoded, converted when a PIL image."""
    if is_encoded(item):
        return decode_image(item, index=index)
    if is_pil_image(item):
        return validate_image(_pixels(item), index=index)
    return validate_image(item, index=index)


def read_image_folder(directory) -> list[np.ndarray]:
    """Every image file in ``directory`` (sorted by name, :data:`IMAGE_EXTENSIONS`), decoded.

    Raises
    ------
    ValueError
        The folder holds no image file.
    """
    names = sorted(n for n in os.listdir(directory) if n.lower().endswith(IMAGE_EXTENSIONS))
    if not names:
        raise ValueError(f"no image files ({', '.join(IMAGE_EXTENSIONS)}) in {directory}")
    return [decode_image(os.path.join(directory, n), index=i) for i, n in enumerate(names)]
