"""``polydom.load``: open a saved index for serving (see :mod:`polydom.index.store` for the guarantees)."""

from __future__ import annotations

import os

from polydom.backends import index_class

__all__ = ["load"]


def load(path: str | os.PathLike, *, trusted=None):
    """Open the index saved at ``path`` (by ``index.save(path)``) for lookups.

    The format, version and metadata are checked now; the index is rebuilt in memory, so lookups
    never touch the disk. Models stay in the memory-mapped LMDB file until a ``Choice.model`` is
    first read; each is then checked (SHA-256, trusted types) and loaded with skops. Neither
    scikit-learn nor sympy is imported before that.

    Parameters
    ----------
    path : str or os.PathLike
        The index directory.
    trusted : iterable of str or type, optional
        Model types to trust beyond polydom's own list (scikit-learn linear models, scalers,
        pipelines, naive Bayes, dummy estimators, numpy arrays), as fully qualified names
        (``"sklearn.tree._tree.Tree"``) or types. An untrusted type in a model raises
        :class:`polydom.UntrustedModelError` naming it, when that model is first used.

    Returns
    -------
    PolyDomIndex
        A consistent snapshot; ``index.refresh()`` switches it to the newest published version.

    Raises
    ------
    IndexNotFoundError
        ``path`` does not exist.
    IndexFormatError
        ``path`` is not an index, or it is damaged (not LMDB, truncated, corrupted).
    IndexVersionError
        The index was written in another storage format.

    Examples
    --------
    >>> import tempfile, polydom
    >>> index = polydom.build({"a": [1.0], "b": [0.0, 2.0]}, lambda fs: 0.5 + 0.2 * len(fs))
    >>> path = tempfile.mkdtemp() + "/idx"
    >>> index.save(path)
    >>> loaded = polydom.load(path)
    >>> loaded.lookup(size=3, budget=7) == index.lookup(size=3, budget=7)
    True
    """
    from polydom.index.store import load_index

    # The backend table resolves the stored tag, importing only that backend's code.
    return load_index(path, trusted=trusted, resolve=index_class)
