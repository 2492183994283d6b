"""polydom's storage layer: indexes persisted in LMDB, published atomically, served in-process.

Callers use the entry points in :mod:`polydom.index.store` (``save_index``, ``load_index``,
``store_of`` and the exceptions) or, on an index, ``save``, ``polydom.load`` and ``refresh``. The
layer knows indexes only through :class:`~polydom.index.state.IndexState` and a backend tag, so
it imports no index class; nothing here imports the algorithm modules.

Modules, bottom up:

* :mod:`.errors` -- what the layer raises, all under ``StoreError``;
* :mod:`.records` -- the records of one version and their checks (pure, no I/O);
* :mod:`.modelcodec` -- models to skops payloads and back, behind checksums and trusted types;
* :mod:`.layout` -- the index directory: version names, the ``current`` pointer, fsync;
* :mod:`.pages` -- a version's LMDB file read with checked positioned reads, never mapped;
* :mod:`.versions` -- a published version pinned and opened read-only by this process;
* :mod:`.lazymodels` -- a version's models, each decoded on first use;
* :mod:`.reader` -- ``load_index`` and the ``StoreReader`` that ``refresh`` asks for newer versions;
* :mod:`.cleanup` -- removing the remains of killed saves and versions no longer kept;
* :mod:`.writer` -- ``save_index``: write a version, publish it, clean up.

Importing this package imports nothing else (so the model codec can be used without LMDB).
"""

__all__: list[str] = []
