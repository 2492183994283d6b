"""Every backend's answers of a run, item by item, kept so that runs can be judged again or pooled."""

from __future__ import annotations

import os

import numpy as np

from polydom.demo.evaluation import GridResult

__all__ = ["ANSWERS_FILE", "save_answers", "load_answers"]


#: Where a run of ``benchmarks/backends.py`` keeps every backend's answers (:func:`save_answers`).
ANSWERS_FILE = "answers.npz"
_ANSWERS_FORMAT = "polydom-demo-answers-v1"
_GRID_FIELDS = ("correct", "measured", "predicted", "n_features", "keys")


def save_answers(path, grids: dict, sizes: np.ndarray, pictures: np.ndarray, y: np.ndarray) -> None:
    """Write every grid's answers item by item, with the items' sizes, pictures and labels, so that
    runs can be judged again or pooled later (``benchmarks/seeds.py`` pools runs with other
    seeds). Plain arrays in an ``.npz`` (no pickle); :func:`load_answers` reads them back."""
    names = list(grids)
    arrays = {"format": np.array(_ANSWERS_FORMAT), "names": np.array(names), "sizes": np.asarray(sizes),
              "pictures": np.asarray(pictures), "y": np.asarray(y)}
    for i, name in enumerate(names):
        grid = grids[name]
        arrays[f"{i}.budgets"] = grid.budgets
        for field in _GRID_FIELDS:
            value = getattr(grid, field)
            if value is not None:
                arrays[f"{i}.{field}"] = value
    tmp = f"{path}.tmp.npz"
    np.savez_compressed(tmp, **arrays)
    os.replace(tmp, path)  # a reader never sees half a file


def load_answers(path) -> tuple[dict, np.ndarray, np.ndarray, np.ndarray]:
    """``(grids, sizes, pictures, y)`` as :func:`save_answers` wrote them.

    Raises
    ------
    ValueError
        The file is not a demo run's answers.
    """
    with np.load(path, allow_pickle=False) as data:
        if "format" not in data or str(data["format"]) != _ANSWERS_FORMAT:
            raise ValueError(f"{path} holds no polydom demo answers ({_ANSWERS_FORMAT})")
        grids = {}
        for i, name in enumerate(data["names"].tolist()):
            fields = {f: data[f"{i}.{f}"] for f in _GRID_FIELDS if f"{i}.{f}" in data}
            grids[name] = GridResult(data[f"{i}.budgets"], **fields)
        return grids, data["sizes"], data["pictures"], data["y"]
