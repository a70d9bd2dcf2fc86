"""Debug checks of the CPU reference executor: shared-tile races and out-of-bounds elements.

Guarantees (only when a launch has debug=True):

* Race detection. Within one barrier interval of a CTA (between two barrier() calls; a tile
  statement counts as a barrier on both sides, since the compiler synchronizes around it), a
  per-thread access to a shared-tile element races with an earlier access by another thread
  when at least one of the two writes: read-after-write, write-after-read, write-after-write.
  Within one statement every read happens before every write. A store whose subscripts and
  value are the same in every thread of the CTA is a write by every thread of the same value:
  those writes do not race with each other, and any thread may read the element afterwards,
  but a read of it by some thread before, or a different write by one thread after, races.
  The first race found raises `RaceError` naming the kernel, the line of each access, the two
  threads, the CTA and the element (tile name and coordinates).
* Out-of-bounds detection. A per-thread element access by an active thread outside its tensor,
  tile or view raises `OutOfBoundsError` naming the kernel, line, thread, CTA and coordinates.
  (Tile slices that run past a tensor are masked by design and are not reported.)
"""
from __future__ import annotations

import numpy as np

from ..lang.diagnostics import OutOfBoundsError, RaceError

NONE = -1
ALL = -2            # written by every thread of the CTA (a uniform store)
BIG = np.iinfo(np.int32).max


class Shadow:
    """Who touched each element of one tile in the current barrier interval, per CTA."""
    __slots__ = ("writer", "wline", "rmin", "rmax", "rline_min", "rline_max", "dirty")

    def __init__(self, batch: int, size: int):
        self.writer = np.full((batch, size), NONE, np.int32)
        self.wline = np.zeros((batch, size), np.int32)
        self.rmin = np.full((batch, size), BIG, np.int32)
        self.rmax = np.full((batch, size), NONE, np.int32)
        self.rline_min = np.zeros((batch, size), np.int32)
        self.rline_max = np.zeros((batch, size), np.int32)
        self.dirty = False

    def reset(self, cta: np.ndarray):
        if not self.dirty:
            return
        if cta.all():
            self.writer.fill(NONE)
            self.rmin.fill(BIG)
            self.rmax.fill(NONE)
            self.dirty = False
        else:
            self.writer[cta] = NONE
            self.rmin[cta] = BIG
            self.rmax[cta] = NONE


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


def check_reads(dbg, span, shadow: Shadow, name, shape, cta_ids, threads, pos):
    """Record per-thread reads of tile elements (flat position `pos` within the CTA's tile);
    a read of an element another thread wrote in this interval is a race."""
    if len(pos) == 0:
        return
    w = shadow.writer[cta_ids, pos]
    bad = (w >= 0) & (w != threads)
    if bad.any():
        i = int(np.argmax(bad))
        b = cta_ids[i]
        msg = (f"data race on tile '{name}'[{_coords(pos[i], shape)}] in {dbg.cta_text(b)}: thread "
               f"{int(threads[i])} reads it at line {dbg.line(span.line)}, but thread {int(w[i])} wrote "
               f"it at line {dbg.line(int(shadow.wline[b, pos[i]]))} with no barrier() between")
        raise dbg.error(RaceError, msg, span)
    line = span.line
    old_min = shadow.rmin[cta_ids, pos]
    old_max = shadow.rmax[cta_ids, pos]
    np.minimum.at(shadow.rmin, (cta_ids, pos), threads.astype(np.int32))
    np.maximum.at(shadow.rmax, (cta_ids, pos), threads.astype(np.int32))
    newmin = shadow.rmin[cta_ids, pos] != old_min
    newmax = shadow.rmax[cta_ids, pos] != old_max
    shadow.rline_min[cta_ids[newmin], pos[newmin]] = line
    shadow.rline_max[cta_ids[newmax], pos[newmax]] = line
    shadow.dirty = True


def check_writes(dbg, span, shadow: Shadow, name, shape, cta_ids, threads, pos):
    """Record per-thread writes; another thread's read or write in this interval is a race."""
    if len(pos) == 0:
        return
    threads = threads.astype(np.int32)
    # write-after-write within this statement: two threads, one element
    key = cta_ids.astype(np.int64) * (1 << 32) + pos
    order = np.lexsort((threads, key))
    k, t = key[order], threads[order]
    same = (k[1:] == k[:-1]) & (t[1:] != t[:-1])
    if same.any():
        j = int(np.argmax(same))
        i0, i1 = order[j], order[j + 1]
        b = cta_ids[i0]
        msg = (f"data race on tile '{name}'[{_coords(pos[i0], shape)}] in {dbg.cta_text(b)}: threads "
               f"{int(threads[i0])} and {int(threads[i1])} both write it at line {dbg.line(span.line)}"
               f" with no barrier() between")
        raise dbg.error(RaceError, msg, span)
    w = shadow.writer[cta_ids, pos]
    bad = (w != NONE) & (w != threads)
    if bad.any():
        i = int(np.argmax(bad))
        b = cta_ids[i]
        who = "every thread" if w[i] == ALL else f"thread {int(w[i])}"
        msg = (f"data race on tile '{name}'[{_coords(pos[i], shape)}] in {dbg.cta_text(b)}: thread "
               f"{int(threads[i])} writes it at line {dbg.line(span.line)}, but {who} wrote "
               f"it at line {dbg.line(int(shadow.wline[b, pos[i]]))} with no barrier() between")
        raise dbg.error(RaceError, msg, span)
    rmin = shadow.rmin[cta_ids, pos]
    rmax = shadow.rmax[cta_ids, pos]
    read = rmax != NONE
    other = read & ((rmin != threads) | (rmax != threads))
    if other.any():
        i = int(np.argmax(other))
        b = cta_ids[i]
        use_min = rmin[i] != threads[i]
        r = int(rmin[i] if use_min else rmax[i])
        rl = int((shadow.rline_min if use_min else shadow.rline_max)[b, pos[i]])
        msg = (f"data race on tile '{name}'[{_coords(pos[i], shape)}] in {dbg.cta_text(b)}: thread "
               f"{int(threads[i])} writes it at line {dbg.line(span.line)}, but thread {r} read it at "
               f"line {dbg.line(rl)} with no barrier() between")
        raise dbg.error(RaceError, msg, span)
    shadow.writer[cta_ids, pos] = threads
    shadow.wline[cta_ids, pos] = span.line
    shadow.dirty = True


def check_uniform_write(dbg, span, shadow: Shadow, name, shape, cta_ids, pos):
    """Every active thread of each CTA writes the same value to one element (`pos` per CTA)."""
    if len(pos) == 0:
        return
    w = shadow.writer[cta_ids, pos]
    bad = w >= 0
    if bad.any():
        i = int(np.argmax(bad))
        b = cta_ids[i]
        msg = (f"data race on tile '{name}'[{_coords(pos[i], shape)}] in {dbg.cta_text(b)}: every thread "
               f"writes it at line {dbg.line(span.line)}, but thread {int(w[i])} wrote it at line "
               f"{dbg.line(int(shadow.wline[b, pos[i]]))} with no barrier() between")
        raise dbg.error(RaceError, msg, span)
    rmax = shadow.rmax[cta_ids, pos]
    read = rmax != NONE
    if read.any():
        i = int(np.argmax(read))
        b = cta_ids[i]
        msg = (f"data race on tile '{name}'[{_coords(pos[i], shape)}] in {dbg.cta_text(b)}: every thread "
               f"writes it at line {dbg.line(span.line)}, but thread {int(rmax[i])} read it at line "
               f"{dbg.line(int(shadow.rline_max[b, pos[i]]))} with no barrier() between")
        raise dbg.error(RaceError, msg, span)
    shadow.writer[cta_ids, pos] = ALL
    shadow.wline[cta_ids, pos] = span.line
    shadow.dirty = True
