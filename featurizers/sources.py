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
import stat
import struct
import time

import numpy as np

from .errors import DecodeDeadline, ImageError, ImageNotFoundError, ImageTooLargeError
from .image_features import validate_image

__all__ = ["is_encoded", "is_pil_image", "header_shape", "pixel_count", "decode_image", "DecodeDeadline", "as_array",
           "read_image_folder",
           "pixel_limit", "set_pixel_limit", "IMAGE_FORMATS"]

#: PIL modes decoded to grey (``"L"``); every other mode decodes to ``"RGB"``.
_GREY_MODES = frozenset({"1", "L", "LA", "I", "I;16", "I;16B", "I;16L", "F"})

#: File names :func:`read_image_folder` reads.
IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".webp")


#: The formats polydom opens (Pillow's names), the ones :data:`IMAGE_EXTENSIONS` name: each is
#: recognised by its first bytes, so a file of any other kind is refused without being read.
IMAGE_FORMATS = ("PNG", "JPEG", "BMP", "TIFF", "WEBP")

#: At most this many bytes are read to learn an image's size from its header (seeks are free, so
#: a TIFF whose directory sits at the end of the file still opens).
HEADER_READ_LIMIT = 4 << 20

_pixel_limit = 89_478_485  # Pillow's own MAX_IMAGE_PIXELS (docs/decisions/pixel-limit.md)


def pixel_limit() -> int:
    """The most pixels an encoded image may claim in its header before it is refused undecoded."""
    return _pixel_limit


def set_pixel_limit(pixels: int) -> int:
    """Set the most pixels an encoded image may claim (:func:`pixel_limit`); returns the previous limit.

    The default, 89,478,485 pixels (about 268 MB decoded as RGB), is the bound at which Pillow
    itself warns of a decompression bomb. Raising it raises Pillow's bound with it, so that the two
    agree. It applies to the whole process: fit, predict and the command line alike.

    Raises
    ------
    ImageError
        ``pixels`` is not a positive int.
    """
    global _pixel_limit
    if isinstance(pixels, bool) or not isinstance(pixels, int) or pixels < 1:
        raise ImageError(f"the pixel limit is a positive int, got {pixels!r:.80}")
    from PIL import Image

    previous, _pixel_limit = _pixel_limit, int(pixels)
    Image.MAX_IMAGE_PIXELS = max(Image.MAX_IMAGE_PIXELS or 0, _pixel_limit)
    return previous


def _where(index) -> str:
    return "image" if index is None else f"image (item {index})"


def is_encoded(item) -> bool:
    """Whether ``item`` is a file path or encoded bytes (rather than pixels)."""
    return isinstance(item, (str, os.PathLike, bytes, bytearray, memoryview))


def is_pil_image(item) -> bool:
    """Whether ``item`` is a PIL image (checked without importing Pillow)."""
    return type(item).__module__.startswith("PIL.") and hasattr(item, "getbands")


class _FileView(io.RawIOBase):
    """A read-only, seekable view of a binary file; subclasses decide what a read may do."""

    def __init__(self, file):
        self._file = file

    def readable(self):
        return True

    def seekable(self):
        return True

    def readinto(self, buffer):
        return self._file.readinto(buffer)

    def seek(self, offset, whence=io.SEEK_SET):
        return self._file.seek(offset, whence)

    def tell(self):
        return self._file.tell()


class _BoundedReader(_FileView):
    """A view that refuses to read more than ``limit`` bytes in all (seeking is free), so
    learning a header never reads a whole file."""

    def __init__(self, file, limit):
        super().__init__(file)
        self._left = limit

    def readinto(self, buffer):
        if self._left <= 0:
            raise OSError(f"no image header within the first {HEADER_READ_LIMIT} bytes")
        count = self._file.readinto(memoryview(buffer)[: self._left])
        self._left -= count or 0
        return count


class _DeadlineReader(_FileView):
    """A view that raises :class:`DecodeDeadline` once ``clock()`` passes ``deadline``. Pillow
    reads a file in blocks while it decodes (64 KiB for JPEG), so a decode stops within a block
    of its deadline."""

    def __init__(self, file, deadline: float, clock):
        super().__init__(file)
        self._deadline, self._clock = deadline, clock

    def readinto(self, buffer):
        if self._clock() > self._deadline:
            raise DecodeDeadline("the decode passed its deadline")
        return self._file.readinto(buffer)


def _open_file(path, where):
    """A binary file object for ``path`` when it is a regular file: opened without blocking, so a
    FIFO or a device is refused at once rather than waited on."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except FileNotFoundError:
        raise ImageNotFoundError(f"{where}: no file {os.fspath(path)!r}") from None
    except OSError as exc:
        raise ImageError(f"{where}: cannot open {os.fspath(path)!r}: {exc.strerror or exc}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ImageError(f"{where}: {os.fspath(path)!r} is not a regular file (a folder, FIFO, socket or "
                             "device): only image files are read")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _open(item, index, *, header_only=False, deadline=None, clock=None):
    """``item`` opened as a PIL image of one of :data:`IMAGE_FORMATS`, its size checked against
    :func:`pixel_limit`; with ``header_only``, no more than :data:`HEADER_READ_LIMIT` bytes read;
    with ``deadline``, every read past it raises :class:`DecodeDeadline`."""
    from PIL import Image, UnidentifiedImageError

    where = _where(index)
    encoded = isinstance(item, (bytes, bytearray, memoryview))
    file = io.BytesIO(bytes(item)) if encoded else _open_file(item, where)
    what = f"{len(bytes(item))} bytes" if encoded else f"file {os.fspath(item)!r}"
    stream = _BoundedReader(file, HEADER_READ_LIMIT) if header_only else file
    if deadline is not None:
        stream = _DeadlineReader(stream, deadline, clock or time.perf_counter)
    try:
        image = Image.open(stream, formats=IMAGE_FORMATS)
    except UnidentifiedImageError:
        file.close()
        raise ImageError(f"{where}: {what} is not an image polydom reads "
                         f"({', '.join(IMAGE_FORMATS)})") from None
    except Image.DecompressionBombError as exc:
        file.close()
        raise ImageTooLargeError(f"{where}: {what} claims more pixels than Pillow decodes, over the pixel limit "
                                 f"of {_pixel_limit:,} (a decompression bomb: {exc})") from None
    except (OSError, ValueError, SyntaxError, EOFError, struct.error) as exc:
        file.close()
        raise ImageError(f"{where}: cannot read {what} as an image: {exc}") from None
    except DecodeDeadline:
        file.close()
        raise
    width, height = image.size
    if width * height > _pixel_limit:
        image.close()
        file.close()
        raise ImageTooLargeError(
            f"{where}: {what} claims {width}x{height} = {width * height:,} pixels, over the pixel limit of "
            f"{_pixel_limit:,} (a decompression bomb, or an image to shrink first; polydom.set_pixel_limit "
            "raises the limit)")
    return image


def header_shape(item, *, index=None) -> tuple[int, int]:
    """``(height, width)`` of an encoded image from its header, without decoding the pixels.

    Raises
    ------
    ImageNotFoundError
        No such file.
    ImageTooLargeError
        The header claims more pixels than :func:`pixel_limit`.
    ImageError
        Not a regular file, or not an image of :data:`IMAGE_FORMATS` within its first
        :data:`HEADER_READ_LIMIT` bytes.
    """
    with _open(item, index, header_only=True) as image:
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


def decode_image(item, *, index=None, deadline: float | None = None, clock=None) -> np.ndarray:
    """The pixels of an encoded image (path or bytes), checked as the features need them.

    With ``deadline`` (on ``clock``, default :func:`time.perf_counter`), the decode stops at the
    first block it reads after the deadline and raises :class:`DecodeDeadline`: serving gives
    up a decode that can no longer leave time for a feature, instead of answering late.

    Raises
    ------
    DecodeDeadline
        ``deadline`` passed during the decode.
    ImageNotFoundError
        No such file.
    ImageTooLargeError
        The header claims more pixels than :func:`pixel_limit`.
    ImageError
        Not an image polydom reads, damaged, or one the features refuse (too small, ...).
    """
    with _open(item, index, deadline=deadline, clock=clock) as image:
        try:
            image.load()
        except (OSError, ValueError, SyntaxError, EOFError, struct.error) as exc:  # truncated or damaged
            raise ImageError(f"{_where(index)}: cannot decode it: {exc}") from None
        return validate_image(_pixels(image), index=index)


def as_array(item, *, index=None) -> np.ndarray:
    """``item`` as a checked array: decoded when encoded, converted when a PIL image."""
    if is_encoded(item):
        return decode_image(item, index=index)
    if is_pil_image(item):
        return validate_image(_pixels(item), index=index)
    return validate_image(item, index=index)


def image_files(directory) -> list[str]:
    """The paths of the image files in ``directory`` (:data:`IMAGE_EXTENSIONS`), sorted by name.

    Raises
    ------
    ImageError
        The folder holds no image file.
    """
    names = sorted(n for n in os.listdir(directory) if n.lower().endswith(IMAGE_EXTENSIONS))
    if not names:
        raise ImageError(f"no image files ({', '.join(IMAGE_EXTENSIONS)}) in {directory}")
    return [os.path.join(directory, n) for n in names]


def read_image_folder(directory) -> list[np.ndarray]:
    """Every image file in ``directory`` (:func:`image_files`), decoded.

    Raises
    ------
    ImageError
        The folder holds no image file.
    """
    return [decode_image(path, index=i) for i, path in enumerate(image_files(directory))]
