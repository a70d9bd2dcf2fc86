"""The README's count of the puzzles is the catalog's: the puzzles in all, the warm-up (puzzle
0) and the exercises after it (it said 22 exercises where the notebook has 23 puzzles)."""
import re
from pathlib import Path

from tilenb.puzzles.catalog import PUZZLES

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_readme_counts_the_puzzles_of_the_catalog():
    text = " ".join(README.read_text().split())
    m = re.search(r"`notebooks/puzzles\.ipynb`: (\d+) puzzles in rising difficulty, a warm-up \(([^)]*)\) "
                  r"then (\d+) exercises", text)
    assert m, "the README's puzzles paragraph does not give the count of puzzles and exercises"
    warm = [p for p in PUZZLES if p.number == 0]
    assert int(m.group(1)) == len(PUZZLES)
    assert len(warm) == 1 and m.group(2).lower() in warm[0].title.lower()
    assert int(m.group(3)) == len(PUZZLES) - 1
