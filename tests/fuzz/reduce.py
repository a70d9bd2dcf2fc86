"""Shrinking a failing generated program to a small reproducer (for tests/fuzz/FINDINGS.md).

`shrink(prog, still_fails)` deletes top-level statements of the kernel body (a statement with a
block, such as a loop, goes as a whole) and unused expression functions, one at a time, keeping
each deletion after which the text still checks and `still_fails(text)` is still true; it
repeats until no deletion is kept. The parameters and inputs stay as they are, so the shrunk
text runs with `prog.args()`. Predicates for the usual failures: `emulator_differs`,
`cpu_internal_error`.
"""
from __future__ import annotations

from typing import Callable, Optional



def _split(text: str):
    """(head lines up to and including the kernel's '{', body statements (lists of lines), tail)."""
    lines = text.split("\n")
    k = next(i for i, ln in enumerate(lines) if ln.startswith("kernel "))
    while not lines[k].rstrip().endswith("{"):
        k += 1
    end = max(i for i, ln in enumerate(lines) if ln.strip() == "}" and not ln.startswith(" "))
    head, body, tail = lines[:k + 1], lines[k + 1:end], lines[end:]
    stmts, cur, depth = [], [], 0
    for ln in body:
        cur.append(ln)
        depth += ln.count("{") - ln.count("}")
        if depth == 0:
            stmts.append(cur)
            cur = []
    if cur:
        stmts.append(cur)
    return head, stmts, tail


def _join(head, stmts, tail):
    return "\n".join(head + [ln for s in stmts for ln in s] + tail)


def checks(text: str) -> bool:
    import tilenb
    try:
        tilenb.compile(text, backend="cpu")
        return True
    except tilenb.TileError:
        return False


def shrink(text: str, still_fails: Callable[[str], bool], rounds: int = 4) -> str:
    head, stmts, tail = _split(text)
    for _ in range(rounds):
        changed = False
        i = len(stmts) - 1
        while i >= 0:
            cand = stmts[:i] + stmts[i + 1:]
            t = _join(head, cand, tail)
            if checks(t) and still_fails(t):
                stmts = cand
                changed = True
            i -= 1
        # expression functions nothing calls any more
        fn_lines = [j for j, ln in enumerate(head) if ln.startswith("fn ")]
        for j in reversed(fn_lines):
            name = head[j].split()[1].split("(")[0]
            if name not in _join([], stmts, []):
                head = head[:j] + head[j + 1:]
                changed = True
        if not changed:
            break
    return _join(head, stmts, tail)


def _run_text(prog, text: str, backend: str, emulate_dir: Optional[str] = None):
    import tilenb
    mod = tilenb.compile(text, backend="cpu")
    k = getattr(mod, prog.kernel)
    args = prog.args()
    if emulate_dir is None:
        (k[prog.grid] if prog.grid is not None else k)(*args)
    else:
        from support import cuda_emulator as EMU
        from tilenb.codegen import generate
        ks = generate(k.ir(), text)
        EMU.run(ks, args, prog.dims, prog.launch_grid(), workdir=emulate_dir, timeout=120)
    names = [n for _, n, _ in prog.params]
    return {n: args[names.index(n)] for n in prog.outputs}


def emulator_differs(prog, workdir: str, fault_only: bool = False) -> Callable[[str], bool]:
    """True when the emulated CUDA of `text` faults, or (unless fault_only) differs from the CPU
    executor beyond the spec's elementwise tolerance."""
    from .model import close

    def pred(text: str) -> bool:
        try:
            ref = _run_text(prog, text, "cpu")
        except Exception:  # noqa: BLE001
            return False
        try:
            got = _run_text(prog, text, "cpu", emulate_dir=workdir)
        except RuntimeError as e:
            return "g++ failed" not in str(e)
        except Exception:  # noqa: BLE001
            return False
        if fault_only:
            return False
        tys = prog.tensor_types()
        return any(not close(ref[n], got[n], tys[n], None)[0] for n in prog.outputs)
    return pred


def cpu_internal_error(prog) -> Callable[[str], bool]:
    def pred(text: str) -> bool:
        import tilenb
        try:
            _run_text(prog, text, "cpu")
        except tilenb.TileError as e:
            return "internal error" in str(e)
        except Exception:  # noqa: BLE001
            return True
        return False
    return pred
