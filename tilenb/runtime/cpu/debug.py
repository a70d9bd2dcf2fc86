"""Debug checks of the CPU reference executor: races within a CTA and out-of-bounds elements.

Guarantees (only when a launch has debug=True):

* Race detection, by the rule of the barrier analysis (`tilenb.analysis.barriers`). A CTA's
  barrier intervals are those of its GPU code: an interval ends at every `barrier()` the
  program runs, at every cluster reduction, and at every barrier the compiler places (before,
  within or after a statement: `barrier_points`). Within one interval a per-thread access (an
  element read or write, an atomic) of an element of a tile or of a tensor races with an earlier
  per-thread access of it by another thread when at least one of the two writes:
  read-after-write, write-after-read, write-after-write. Atomic updates of one element by
  several threads do not race with each other; against any other access by another thread they
  do. Within one statement every read happens before every write. A store whose subscripts and
  value are the same in every thread of the CTA is a write by every thread of the same value:
  those writes do not race with each other, and any thread may read the element afterwards, but
  a read of it by some thread before, or a different write by one thread after, races. Tile
  statements' own accesses are not recorded: the analysis places a barrier between each of them
  and any access by another thread that could meet it, in shared or in global memory, so what
  is left to the program is per-thread code against per-thread code, the hazards `barrier()` is
  for. Accesses of different CTAs are never a race here (spec section 13: the language does not
  order CTAs). The first race found raises `RaceError` naming the kernel, the line of each
  access, the two threads, the CTA and the element (tile or tensor name and coordinates).
* Out-of-bounds detection. A per-thread element access by an active thread outside its tensor,
  tile or view raises `OutOfBoundsError` naming the kernel, line, thread, CTA and coordinates.
  (Tile slices that run past a tensor are masked by design and are not reported.)
"""
from __future__ import annotations

import numpy as np

from ...lang.diagnostics import OutOfBoundsError, RaceError

NONE = -1
ALL = -2            # written by every thread of the CTA (a uniform store)
BIG = np.iinfo(np.int32).max
DENSE_LIMIT = 1 << 22   # records kept in arrays up to this many elements (CTAs x elements), else sparse


class Shadow:
    """Who touched each element of one tile or tensor in the current barrier interval, per CTA:
    the writer (a thread, ALL or NONE), the lowest and highest reading thread, the lowest and
    highest thread that updated it atomically, and the line of each. Records live in flat arrays
    indexed by a slot per (CTA, element): dense (every element of every CTA of the batch) when
    that is at most DENSE_LIMIT slots, else sparse: slots only for the elements touched since the
    last barrier, found through a sorted index of their keys (a large index and a small one that
    new keys go to, merged into the large one when it has grown by a quarter, so that per-thread
    loops touching many new elements stay near n log n), so a large tensor costs only what
    per-thread code touches."""
    _FIELDS = (("writer", NONE), ("wline", 0), ("rmin", BIG), ("rmax", NONE), ("rline_min", 0),
               ("rline_max", 0), ("amin", BIG), ("amax", NONE), ("aline", 0))

    def __init__(self, batch: int, size: int, what: str = "tile"):
        self.batch, self.size, self.what = batch, size, what
        self.dense = batch * size <= DENSE_LIMIT
        self._alloc(batch * size if self.dense else 1024)
        self.used = 0                                   # sparse: slots handed out
        self.index = [(np.zeros(0, np.int64), np.zeros(0, np.int64))] * 2   # (keys, slots): large, small
        self.dirty = False

    def _alloc(self, n: int):
        for name, v in self._FIELDS:
            setattr(self, name, np.full(n, v, np.int32))

    def _find(self, key: np.ndarray) -> np.ndarray:
        out = np.full(len(key), -1, np.int64)
        for keys, slot in self.index:
            if not len(keys):
                continue
            i = np.searchsorted(keys, key)
            ok = i < len(keys)
            ok[ok] = keys[i[ok]] == key[ok]
            out[ok] = slot[i[ok]]
        return out

    def slots(self, cta: np.ndarray, pos: np.ndarray) -> np.ndarray:
        """The record slot of each (CTA, element) pair, made where it is missing."""
        cta = np.asarray(cta, np.int64)
        pos = np.asarray(pos, np.int64)
        if self.dense:
            return cta * self.size + pos
        key = pos * self.batch + cta
        found = self._find(key)
        miss = found < 0
        if miss.any():
            new = np.unique(key[miss])
            n0, n1 = self.used, self.used + len(new)
            cap = len(self.writer)
            if n1 > cap:                                # grow the record arrays (doubling)
                cap = max(n1, 2 * cap)
                for name, v in self._FIELDS:
                    a = np.full(cap, v, np.int32)
                    a[:n0] = getattr(self, name)[:n0]
                    setattr(self, name, a)
            else:
                for name, v in self._FIELDS:
                    getattr(self, name)[n0:n1] = v
            self.used = n1
            (bk, bs), (sk, ss) = self.index
            sk, ss = np.concatenate([sk, new]), np.concatenate([ss, np.arange(n0, n1, dtype=np.int64)])
            o = np.argsort(sk, kind="stable")
            sk, ss = sk[o], ss[o]
            if len(sk) > max(1 << 16, len(bk) // 4):   # fold the small index into the large one
                bk, bs = np.concatenate([bk, sk]), np.concatenate([bs, ss])
                o = np.argsort(bk, kind="stable")
                bk, bs = bk[o], bs[o]
                sk, ss = sk[:0], ss[:0]
            self.index = [(bk, bs), (sk, ss)]
            found = self._find(key)
        return found

    def reset(self, cta: np.ndarray):
        """A barrier in the CTAs where `cta` (bool per CTA of the batch) holds."""
        if not self.dirty:
            return
        cta = np.asarray(cta, bool)
        if self.dense:
            if cta.all():
                for name, v in self._FIELDS:
                    getattr(self, name).fill(v)
                self.dirty = False
                return
            rows = np.flatnonzero(cta)
            for name, v in self._FIELDS:
                getattr(self, name).reshape(self.batch, self.size)[rows] = v
            return
        if cta.all():
            self.used = 0
            self.index = [(np.zeros(0, np.int64), np.zeros(0, np.int64))] * 2
            self.dirty = False
            return
        # forget the keys of those CTAs; their slots are not handed out again until a full reset
        self.index = [(k[~cta[k % self.batch]], s[~cta[k % self.batch]]) for k, s in self.index]


def barrier_points(kir):
    """(ids of the statements the compiler places a barrier before, ids of those it places one
    within or after): the analysis' barriers (`tilenb.analysis.analyze(kir).barriers`), the ones
    the GPU code runs, so that the CPU's barrier intervals are the GPU's. A barrier within a
    statement falls after its element reads, like one after it."""
    from ...analysis import analyze
    a = analyze(kir)
    at = dict(a.lifetimes.positions)
    before, after = set(), set()
    for b in a.barriers:
        (before if b.where == "before" else after).add(id(at[b.position]))
    return before, after


class DebugContext:
    """What a debug report needs: the kernel's name, the source, the CTA ids of the batch."""

    def __init__(self, kernel_name, source, line_offset, filename, cta_coords):
        self.kernel = kernel_name
        self.source = source
        self.line_offset = line_offset
        self.filename = filename
        self.cta_coords = cta_coords     # function: batch index -> (x, y, z)

    def line(self, span_line):
        return span_line + self.line_offset

    def error(self, cls, message, span):
        line = span.line
        src = None
        if self.source is not None and 1 <= line <= len(self.source):
            src = self.source[line - 1]
        return cls(f"kernel '{self.kernel}': {message}", line + self.line_offset, span.column,
                   self.filename, src)

    def cta_text(self, b):
        x, y, z = self.cta_coords(int(b))
        return f"CTA ({x}, {y}, {z})"


def _coords(flat_index, shape):
    return ", ".join(str(int(c)) for c in np.unravel_index(int(flat_index), shape))


def report_out_of_bounds(dbg: DebugContext, span, where, cta_ids, threads, write):
    """Raise OutOfBoundsError for the first lane (lowest CTA, then thread); `where` describes
    the element that lane addressed."""
    verb = "writes" if write else "reads"
    more = len(cta_ids) - 1
    tail = f" ({more} other out-of-bounds access{'es' if more != 1 else ''} in this statement too)" if more > 0 else ""
    msg = (f"out-of-bounds {'write' if write else 'read'} at line {dbg.line(span.line)}: thread "
           f"{int(threads[0])} of {dbg.cta_text(cta_ids[0])} {verb} {where}{tail}")
    raise dbg.error(OutOfBoundsError, msg, span)


def _race(dbg, span, shadow, name, shape, b, pos, text):
    msg = f"data race on {shadow.what} '{name}'[{_coords(pos, shape)}] in {dbg.cta_text(b)}: {text} with no barrier() between"
    raise dbg.error(RaceError, msg, span)


def _atomic_by_other(shadow, idx, threads):
    amax = shadow.amax[idx]
    return (amax != NONE) & ((shadow.amin[idx] != threads) | (amax != threads))


def _other_atomic_thread(shadow, k, t):
    return int(shadow.amin[k] if shadow.amin[k] != t else shadow.amax[k])


def check_reads(dbg, span, shadow: Shadow, name, shape, cta_ids, threads, pos):
    """Record per-thread reads of elements (flat position `pos` within the CTA's tile, or within
    the tensor); a read of an element another thread wrote (atomically or not) in this interval
    is a race."""
    if len(pos) == 0:
        return
    threads = threads.astype(np.int32)
    idx = shadow.slots(cta_ids, pos)
    w = shadow.writer[idx]
    bad = (w >= 0) & (w != threads)
    if bad.any():
        i = int(np.argmax(bad))
        k = idx[i]
        _race(dbg, span, shadow, name, shape, cta_ids[i], pos[i],
              f"thread {int(threads[i])} reads it at line {dbg.line(span.line)}, but thread {int(w[i])} wrote "
              f"it at line {dbg.line(int(shadow.wline[k]))}")
    bad = _atomic_by_other(shadow, idx, threads)
    if bad.any():
        i = int(np.argmax(bad))
        k = idx[i]
        _race(dbg, span, shadow, name, shape, cta_ids[i], pos[i],
              f"thread {int(threads[i])} reads it at line {dbg.line(span.line)}, but thread "
              f"{_other_atomic_thread(shadow, k, threads[i])} updated it atomically at line {dbg.line(int(shadow.aline[k]))}")
    line = span.line
    old_min = shadow.rmin[idx]
    old_max = shadow.rmax[idx]
    np.minimum.at(shadow.rmin, idx, threads)
    np.maximum.at(shadow.rmax, idx, threads)
    newmin = shadow.rmin[idx] != old_min
    newmax = shadow.rmax[idx] != old_max
    shadow.rline_min[idx[newmin]] = line
    shadow.rline_max[idx[newmax]] = line
    shadow.dirty = True


def _check_readers(dbg, span, shadow, name, shape, cta_ids, threads, pos, idx, verb):
    rmin = shadow.rmin[idx]
    rmax = shadow.rmax[idx]
    read = rmax != NONE
    other = read & ((rmin != threads) | (rmax != threads))
    if other.any():
        i = int(np.argmax(other))
        k = idx[i]
        use_min = rmin[i] != threads[i]
        r = int(rmin[i] if use_min else rmax[i])
        rl = int((shadow.rline_min if use_min else shadow.rline_max)[k])
        _race(dbg, span, shadow, name, shape, cta_ids[i], pos[i],
              f"thread {int(threads[i])} {verb} it at line {dbg.line(span.line)}, but thread {r} read it at "
              f"line {dbg.line(rl)}")


def check_writes(dbg, span, shadow: Shadow, name, shape, cta_ids, threads, pos, atomic=False):
    """Record per-thread writes (`atomic`: read-modify-writes indivisible against each other);
    another thread's read or write in this interval is a race, except that atomic updates of one
    element by several threads are not."""
    if len(pos) == 0:
        return
    threads = threads.astype(np.int32)
    idx = shadow.slots(cta_ids, pos)
    verb = "updates" if atomic else "writes"
    if not atomic:
        # write-after-write within this statement: two threads, one element
        order = np.lexsort((threads, idx))
        k, t = idx[order], threads[order]
        same = (k[1:] == k[:-1]) & (t[1:] != t[:-1])
        if same.any():
            j = int(np.argmax(same))
            i0, i1 = order[j], order[j + 1]
            _race(dbg, span, shadow, name, shape, cta_ids[i0], pos[i0],
                  f"threads {int(threads[i0])} and {int(threads[i1])} both write it at line {dbg.line(span.line)}")
    w = shadow.writer[idx]
    bad = (w != NONE) & (w != threads)
    if bad.any():
        i = int(np.argmax(bad))
        k = idx[i]
        who = "every thread" if w[i] == ALL else f"thread {int(w[i])}"
        _race(dbg, span, shadow, name, shape, cta_ids[i], pos[i],
              f"thread {int(threads[i])} {verb} it{' atomically' if atomic else ''} at line {dbg.line(span.line)}, "
              f"but {who} wrote it at line {dbg.line(int(shadow.wline[k]))}")
    if not atomic:
        bad = _atomic_by_other(shadow, idx, threads)
        if bad.any():
            i = int(np.argmax(bad))
            k = idx[i]
            _race(dbg, span, shadow, name, shape, cta_ids[i], pos[i],
                  f"thread {int(threads[i])} writes it at line {dbg.line(span.line)}, but thread "
                  f"{_other_atomic_thread(shadow, k, threads[i])} updated it atomically at line "
                  f"{dbg.line(int(shadow.aline[k]))}")
    _check_readers(dbg, span, shadow, name, shape, cta_ids, threads, pos, idx,
                   "updates" if atomic else "writes")
    if atomic:
        np.minimum.at(shadow.amin, idx, threads)
        np.maximum.at(shadow.amax, idx, threads)
        shadow.aline[idx] = span.line
    else:
        shadow.writer[idx] = threads
        shadow.wline[idx] = span.line
    shadow.dirty = True


def check_uniform_write(dbg, span, shadow: Shadow, name, shape, cta_ids, pos):
    """Every active thread of each CTA writes the same value to one element (`pos` per CTA)."""
    if len(pos) == 0:
        return
    idx = shadow.slots(cta_ids, pos)
    w = shadow.writer[idx]
    bad = w >= 0
    if bad.any():
        i = int(np.argmax(bad))
        _race(dbg, span, shadow, name, shape, cta_ids[i], pos[i],
              f"every thread writes it at line {dbg.line(span.line)}, but thread {int(w[i])} wrote it at line "
              f"{dbg.line(int(shadow.wline[idx[i]]))}")
    rmax = shadow.rmax[idx]
    read = rmax != NONE
    if read.any():
        i = int(np.argmax(read))
        _race(dbg, span, shadow, name, shape, cta_ids[i], pos[i],
              f"every thread writes it at line {dbg.line(span.line)}, but thread {int(rmax[i])} read it at line "
              f"{dbg.line(int(shadow.rline_max[idx[i]]))}")
    amax = shadow.amax[idx]
    if (amax != NONE).any():
        i = int(np.argmax(amax != NONE))
        _race(dbg, span, shadow, name, shape, cta_ids[i], pos[i],
              f"every thread writes it at line {dbg.line(span.line)}, but thread {int(amax[i])} updated it "
              f"atomically at line {dbg.line(int(shadow.aline[idx[i]]))}")
    shadow.writer[idx] = ALL
    shadow.wline[idx] = span.line
    shadow.dirty = True
