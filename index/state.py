"""An index's storable form, shared by every backend and the storage layer.

Backends turn themselves into an :class:`IndexState` (``to_state``) and back (``from_state``);
the storage layer writes and reads only this, so it never needs to know an index class.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

__all__ = ["IndexState"]


class IndexState(NamedTuple):
    """A backend-neutral snapshot of an index, for storage.

    Attributes
    ----------
    meta : dict
        JSON-able: ``backend`` tag, ``features`` (ordered names), ``costs`` (coefficients per
        feature), ``domain``, ``params``, ``stats`` and whatever else the backend needs.
    arrays : dict of str to numpy.ndarray
        Flat numeric arrays (1-D, fixed dtype).
    models : mapping of int to object
        Trained models by feature-set mask.
    """

    meta: dict
    arrays: dict
    models: Mapping
