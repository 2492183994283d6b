"""Feature sets as bitmasks over an ordered tuple of feature names.

Bit ``i`` of a mask stands for ``names[i]``. Masks are plain ``int`` so that subset tests are
``a & b == a`` and the lattice can be walked without allocating sets.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

__all__ = ["FeatureSpace", "popcount", "bits_of", "canonical_key"]


def popcount(mask: int) -> int:
    """Number of features in ``mask``."""
    return mask.bit_count()


def bits_of(mask: int) -> tuple[int, ...]:
    """Ascending feature indices present in ``mask``."""
    out = []
    i = 0
    while mask:
        if mask & 1:
            out.append(i)
        mask >>= 1
        i += 1
    return tuple(out)


def canonical_key(mask: int) -> tuple[int, tuple[int, ...]]:
    """Deterministic order of feature sets: fewer features first, then by sorted feature indices.

    This is the order in which a lattice layer is processed (so results do not depend on hashing) and the last tie-break
    everywhere a choice between sets must not depend on hashing.
    """
    return (mask.bit_count(), bits_of(mask))


#: Feature sets are bitmasks stored and vectorised as signed 64-bit integers.
MAX_FEATURES = 62


class FeatureSpace:
    """An ordered list of distinct feature names and the conversions mask <-> frozenset.

    Parameters
    ----------
    names : sequence of str
        Feature names; the position of a name is its bit in every mask.

    Raises
    ------
    TypeError
        If a name is not a string.
    ValueError
        If there are no names or a name repeats.
    """

    __slots__ = ("names", "_bit", "full")

    def __init__(self, names: Iterable[str]):
        names = tuple(names)
        for name in names:
            if not isinstance(name, str):
                raise TypeError(f"feature names must be strings, got {name!r} of type {type(name).__name__}")
        if not names:
            raise ValueError("at least one feature is required")
        if len(set(names)) != len(names):
            dupes = sorted({n for n in names if names.count(n) > 1})
            raise ValueError(f"duplicate feature names: {dupes}")
        if len(names) > MAX_FEATURES:
            raise ValueError(
                f"at most {MAX_FEATURES} features are supported, got {len(names)}: feature sets are stored "
                f"and vectorised as signed 64-bit bitmasks"
            )
        self.names: tuple[str, ...] = names
        self._bit = {name: 1 << i for i, name in enumerate(names)}
        self.full: int = (1 << len(names)) - 1

    def __len__(self) -> int:
        return len(self.names)

    def __repr__(self) -> str:
        return f"FeatureSpace({list(self.names)!r})"

    def mask(self, features: Iterable[str]) -> int:
        """Bitmask of ``features``; raises ``ValueError`` naming an unknown feature."""
        m = 0
        for name in features:
            try:
                m |= self._bit[name]
            except KeyError:
                raise ValueError(f"unknown feature {name!r}; known features: {list(self.names)}") from None
            except TypeError:
                raise TypeError(f"feature names must be strings, got {name!r}") from None
        return m

    def frozenset(self, mask: int) -> frozenset[str]:
        """The feature names in ``mask``."""
        return frozenset(self.names[i] for i in bits_of(mask))

    def sorted_names(self, mask: int) -> tuple[str, ...]:
        """The feature names in ``mask`` in feature order."""
        return tuple(self.names[i] for i in bits_of(mask))

    def children(self, mask: int) -> Iterator[int]:
        """Sets one level down: ``mask`` minus one feature."""
        m = mask
        while m:
            low = m & -m
            yield mask ^ low
            m ^= low

    def parents(self, mask: int) -> Iterator[int]:
        """Sets one level up: ``mask`` plus one feature."""
        m = self.full & ~mask
        while m:
            low = m & -m
            yield mask | low
            m ^= low

    def all_masks(self) -> range:
        """Every subset, as the masks ``0 .. 2**len - 1``."""
        return range(self.full + 1)


def sort_masks(masks: Iterable[int]) -> list[int]:
    """``masks`` in :func:`canonical_key` order."""
    return sorted(masks, key=canonical_key)


def as_names(space: FeatureSpace, masks: Sequence[int]) -> list[frozenset[str]]:
    """Convenience: several masks as frozensets of names."""
    return [space.frozenset(m) for m in masks]
