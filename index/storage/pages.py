"""A published version's LMDB file, read without mapping it: every page checked before it is used.

LMDB reads its data file through a memory map. A damaged or crafted page whose node offset, data
size or overflow extent points past the end of the file makes a reader touch unmapped file pages,
and the process dies of SIGBUS, which no exception handler can catch. So polydom reads the
versions it publishes itself: :class:`LmdbFile` walks the B-trees of LMDB's file format (0.9,
``MDB_DATA_VERSION`` 1, 64-bit page numbers -- what the bundled binding writes) with positioned
reads (``os.pread``) and checks every page it follows before using anything in it:

* the meta pages: magic, format version, page size, the newest transaction's ``last_pgno``
  inside the file;
* each branch or leaf page: the page number it records is the one asked for, its kind is the
  one expected at that depth, ``lower``/``upper`` and every node offset lie inside the page,
  every key and inline value fits, keys ascend;
* each overflow value: its first page is an overflow page inside the file, long enough for the
  value.

Damage becomes an :class:`~.errors.IndexFormatError`; nothing is mapped, so nothing can fault,
and a walk visits each page once and descends at most the tree's recorded depth, so crafted page
links cannot make it loop. Writing stays with LMDB (:mod:`.writer`), which this module reads
back before a version is published.

The record checksums (:mod:`.records`, :mod:`.modelcodec`) still decide whether the *contents*
are intact; this module only guarantees that reading them is safe and bounded.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator

from .errors import IndexFormatError

__all__ = ["LmdbFile"]

_MAGIC = 0xBEEFC0DE
_DATA_VERSION = 1
_PAGE_HEADER = struct.Struct("<QHHHH")  # pgno, pad, flags, lower, upper
_OVERFLOW_PAGES = struct.Struct("<I")  # at offset 12 of an overflow page, over lower/upper
_META = struct.Struct("<IIQQ")  # magic, version, address, mapsize (after the page header)
_DB = struct.Struct("<IHHQQQQQ")  # pad (the page size, in the free DB), flags, depth, branch, leaf, overflow, entries, root
_LAST = struct.Struct("<QQ")  # last_pgno, txnid
_NODE = struct.Struct("<HHHH")  # lo, hi, flags, ksize
_PGNO = struct.Struct("<Q")
_HEADER_SIZE = _PAGE_HEADER.size
_META_AT, _FREE_DB_AT, _MAIN_DB_AT, _LAST_AT = 16, 40, 88, 136
_P_BRANCH, _P_LEAF, _P_OVERFLOW, _P_META, _P_LEAF2, _P_SUBP = 0x01, 0x02, 0x04, 0x08, 0x20, 0x40
_F_BIGDATA, _F_SUBDATA, _F_DUPDATA = 0x01, 0x02, 0x04
_P_INVALID = (1 << 64) - 1
_MAX_DEPTH = 32  # a B-tree of 4 KiB pages this deep would hold more entries than any file can


class _Tree:
    """One database's root record (``MDB_db``)."""

    __slots__ = ("flags", "depth", "entries", "root")

    def __init__(self, raw: bytes, at: int):
        _, self.flags, self.depth, _, _, _, self.entries, self.root = _DB.unpack_from(raw, at)


class LmdbFile:
    """Read-only access to the named databases of one LMDB data file, through ``os.pread``.

    Parameters
    ----------
    fd : int
        An open descriptor of a regular file (the caller checks that); it is not closed here.
    where : str
        Names the version in error messages.

    Raises
    ------
    IndexFormatError
        Not an LMDB file of the supported format, truncated, or damaged where it was read. Every
        method raises it for damage found on the pages it reads.
    """

    def __init__(self, fd: int, where: str):
        self._fd, self.where = fd, where
        self._size = os.fstat(fd).st_size
        head = self._read(0, _LAST_AT + _LAST.size, "meta page 0")
        self.psize = _DB.unpack_from(head, _FREE_DB_AT)[0]
        if not (512 <= self.psize <= 65536 and self.psize & (self.psize - 1) == 0):
            self._damaged(f"impossible page size {self.psize} (not an LMDB file, or a damaged one)")
        metas = [head, self._read(self.psize, _LAST_AT + _LAST.size, "meta page 1")]
        for number, raw in enumerate(metas):
            magic, version, _, _ = _META.unpack_from(raw, _META_AT)
            if magic != _MAGIC:
                self._damaged(f"meta page {number} is not an LMDB meta page")
            if version != _DATA_VERSION:
                self._damaged(f"LMDB data format {version} is not supported (polydom reads format {_DATA_VERSION})")
        # LMDB uses the meta page of the newer transaction (the other is the previous commit).
        meta = max(metas, key=lambda raw: _LAST.unpack_from(raw, _LAST_AT)[1])
        self.last_pgno = _LAST.unpack_from(meta, _LAST_AT)[0]
        if self.last_pgno < 1 or (self.last_pgno + 1) * self.psize > self._size:
            self._damaged(
                f"the LMDB data file is truncated ({self._size} bytes; its meta page names "
                f"{self.last_pgno + 1} pages of {self.psize} bytes)"
            )
        main = _Tree(meta, _MAIN_DB_AT)
        if main.flags:
            self._damaged(f"the LMDB main database has flags {main.flags:#x}")
        self._trees: dict[bytes, _Tree] = {}
        for name, value in self._walk(main, "the main database", values=True, subdata=True):
            if len(value) != _DB.size:
                self._damaged(f"the record of database {name!r} is {len(value)} bytes")
            tree = _Tree(value, 0)
            if tree.flags:
                self._damaged(f"database {name!r} has flags {tree.flags:#x} (polydom writes plain databases)")
            self._trees[name] = tree

    # ------------------------------------------------------------------ reading

    def _damaged(self, what: str):
        raise IndexFormatError(f"{self.where}: {what}")

    def _read(self, offset: int, length: int, what: str) -> bytes:
        if offset + length > self._size:
            self._damaged(f"the LMDB data file is truncated ({what} lies past its end)")
        try:
            raw = os.pread(self._fd, length, offset)
        except OSError as exc:
            raise IndexFormatError(f"{self.where}: reading the LMDB data file failed ({exc.strerror or exc})") from None
        if len(raw) != length:
            self._damaged(f"the LMDB data file is truncated ({what} lies past its end)")
        return raw

    def _page(self, pgno: int, what: str) -> tuple[bytes, int, int]:
        """``(page, flags, count)`` of a branch or leaf page, its header and node offsets checked."""
        if not 2 <= pgno <= self.last_pgno:
            self._damaged(f"{what} points to page {pgno}, outside the file's pages 2..{self.last_pgno}")
        page = self._read(pgno * self.psize, self.psize, f"page {pgno}")
        recorded, _, flags, lower, upper = _PAGE_HEADER.unpack_from(page)
        if recorded != pgno:
            self._damaged(f"page {pgno} records the number {recorded}")
        if flags & (_P_LEAF2 | _P_SUBP | _P_OVERFLOW | _P_META) or (flags & (_P_BRANCH | _P_LEAF)) not in (_P_BRANCH, _P_LEAF):
            self._damaged(f"page {pgno} has flags {flags:#x}, not those of a branch or leaf page")
        if not (_HEADER_SIZE <= lower <= upper <= self.psize) or (lower - _HEADER_SIZE) % 2:
            self._damaged(f"page {pgno} has bounds lower={lower}, upper={upper}")
        count = (lower - _HEADER_SIZE) // 2
        if count == 0:
            self._damaged(f"page {pgno} holds no entries")
        return page, flags, count

    def _node(self, page: bytes, pgno: int, i: int, upper: int) -> tuple[int, int, int, bytes, int]:
        """``(lo, hi, flags, key, data_offset)`` of node ``i``, its header and key inside the page."""
        (ptr,) = struct.unpack_from("<H", page, _HEADER_SIZE + 2 * i)
        if ptr < upper or ptr + _NODE.size > self.psize:
            self._damaged(f"page {pgno}: node {i} starts at {ptr}, outside the page's node area")
        lo, hi, flags, ksize = _NODE.unpack_from(page, ptr)
        start = ptr + _NODE.size
        if start + ksize > self.psize:
            self._damaged(f"page {pgno}: the key of node {i} runs past the page")
        return lo, hi, flags, page[start : start + ksize], start + ksize

    def _value(self, page: bytes, pgno: int, i: int, lo: int, hi: int, flags: int, at: int, subdata: bool, read: bool):
        size = lo | hi << 16
        if flags & _F_DUPDATA or bool(flags & _F_SUBDATA) != subdata or flags & ~(_F_BIGDATA | _F_SUBDATA):
            self._damaged(f"page {pgno}: node {i} has flags {flags:#x}")
        if not flags & _F_BIGDATA:
            if at + size > self.psize:
                self._damaged(f"page {pgno}: the value of node {i} runs past the page")
            return page[at : at + size] if read else None
        if at + _PGNO.size > self.psize:
            self._damaged(f"page {pgno}: node {i} is cut off")
        (first,) = _PGNO.unpack_from(page, at)
        if not 2 <= first <= self.last_pgno:
            self._damaged(f"page {pgno}: node {i}'s value lies on page {first}, outside the file")
        header = self._read(first * self.psize, _HEADER_SIZE, f"page {first}")
        recorded, _, oflags, _, _ = _PAGE_HEADER.unpack_from(header)
        (pages,) = _OVERFLOW_PAGES.unpack_from(header, 12)
        if recorded != first or not oflags & _P_OVERFLOW or oflags & (_P_BRANCH | _P_LEAF | _P_META):
            self._damaged(f"page {first} is not the overflow page node {i} of page {pgno} names")
        if pages < 1 or first + pages - 1 > self.last_pgno or size > pages * self.psize - _HEADER_SIZE:
            self._damaged(f"overflow page {first} claims {pages} pages for a {size}-byte value")
        return self._read(first * self.psize + _HEADER_SIZE, size, f"the value on page {first}") if read else None

    def _walk(self, tree: _Tree, what: str, *, values: bool, subdata: bool = False) -> Iterator[tuple[bytes, bytes]]:
        """Every ``(key, value)`` of ``tree`` in key order (values None unless ``values``)."""
        if tree.root == _P_INVALID:
            if tree.entries or tree.depth:
                self._damaged(f"{what} is empty but records {tree.entries} entries")
            return
        if not 1 <= tree.depth <= _MAX_DEPTH:
            self._damaged(f"{what} records depth {tree.depth}")
        seen: set[int] = set()
        stack = [(tree.root, 1)]
        previous, count = None, 0
        while stack:
            pgno, level = stack.pop()
            if pgno in seen:
                self._damaged(f"{what} reaches page {pgno} twice")
            seen.add(pgno)
            page, flags, n = self._page(pgno, what)
            upper = _PAGE_HEADER.unpack_from(page)[4]
            if flags & _P_LEAF:
                if level != tree.depth:
                    self._damaged(f"{what}: leaf page {pgno} at depth {level} of {tree.depth}")
                for i in range(n):
                    lo, hi, nflags, key, at = self._node(page, pgno, i, upper)
                    if previous is not None and key <= previous:
                        self._damaged(f"{what}: keys out of order on page {pgno}")
                    previous = key
                    count += 1
                    yield key, self._value(page, pgno, i, lo, hi, nflags, at, subdata, values)
            else:
                if level >= tree.depth:
                    self._damaged(f"{what}: branch page {pgno} at depth {level} of {tree.depth}")
                children = []
                for i in range(n):
                    lo, hi, high, _, _ = self._node(page, pgno, i, upper)
                    children.append(lo | hi << 16 | high << 32)
                stack.extend((child, level + 1) for child in reversed(children))
        if count != tree.entries:
            self._damaged(f"{what} holds {count} entries but records {tree.entries}")

    def _tree(self, name: bytes) -> _Tree:
        try:
            return self._trees[name]
        except KeyError:
            self._damaged(f"the LMDB environment has no database {name.decode(errors='replace')!r}")

    # ------------------------------------------------------------------ the interface

    def has(self, name: bytes) -> bool:
        """Whether the file holds the named database."""
        return name in self._trees

    def entries(self, name: bytes) -> int:
        """The entry count the database records (checked against the entries by :meth:`items`)."""
        return self._tree(name).entries

    def items(self, name: bytes) -> Iterator[tuple[bytes, bytes]]:
        """Every ``(key, value)`` of the named database, in key order; ``O(pages)`` reads."""
        return self._walk(self._tree(name), f"database {name.decode(errors='replace')!r}", values=True)

    def keys(self, name: bytes) -> Iterator[bytes]:
        """Every key of the named database, in order, without reading overflow values."""
        return (k for k, _ in self._walk(self._tree(name), f"database {name.decode(errors='replace')!r}", values=False))

    def get(self, name: bytes, key: bytes, *, read: bool = True):
        """The value under ``key`` (or True when ``read`` is False), None if absent; ``O(depth)`` reads.

        Descends by binary search over each branch page's keys, the first of which LMDB leaves
        empty (it stands for "everything below the second").
        """
        tree = self._tree(name)
        what = f"database {name.decode(errors='replace')!r}"
        if tree.root == _P_INVALID:
            return None
        if not 1 <= tree.depth <= _MAX_DEPTH:
            self._damaged(f"{what} records depth {tree.depth}")
        pgno = tree.root
        for level in range(1, tree.depth + 1):
            page, flags, n = self._page(pgno, what)
            upper = _PAGE_HEADER.unpack_from(page)[4]
            if bool(flags & _P_LEAF) != (level == tree.depth):
                self._damaged(f"{what}: page {pgno} at depth {level} of {tree.depth} has the wrong kind")
            if flags & _P_LEAF:
                lo_i, hi_i = 0, n
                while lo_i < hi_i:
                    mid = (lo_i + hi_i) // 2
                    lo, hi, nflags, k, at = self._node(page, pgno, mid, upper)
                    if k == key:
                        value = self._value(page, pgno, mid, lo, hi, nflags, at, False, read)
                        return value if read else True
                    if k < key:
                        lo_i = mid + 1
                    else:
                        hi_i = mid
                return None
            # the last node whose key is <= ``key`` (node 0 counts as the smallest key)
            lo_i, hi_i = 1, n
            while lo_i < hi_i:
                mid = (lo_i + hi_i) // 2
                if self._node(page, pgno, mid, upper)[3] <= key:
                    lo_i = mid + 1
                else:
                    hi_i = mid
            lo, hi, high, _, _ = self._node(page, pgno, lo_i - 1, upper)
            pgno = lo | hi << 16 | high << 32
        self._damaged(f"{what}: no leaf page at depth {tree.depth}")
