"""The shipped code's complexity budget (radon's grades), checked by `make test`.

Each function, method and class of ``dispatcher/`` is graded by its cyclomatic complexity
(radon: A 1-5, B 6-10, C 11-20, D 21-30, E 31-40, F 41+). The budget: no block graded D
or worse, and at most ``C_BUDGET`` graded C. A block over it is split where it does two
things, not squeezed: CONTRIBUTING, "Complexity".

    python -m tools.complexity            # the C blocks, and whether the budget holds
"""

from __future__ import annotations

import sys
from pathlib import Path

from radon.complexity import cc_rank, cc_visit

ROOT = Path(__file__).parents[1]
C_BUDGET = 20
"""At most this many blocks graded C: a new one is paid for by splitting another."""


def graded(package: Path) -> list[tuple[str, str, int]]:
    """Every block of ``package`` graded C or worse: (where, grade, complexity), most complex first."""
    found = []
    for path in sorted(package.rglob("*.py")):
        for block in cc_visit(path.read_text()):
            grade = cc_rank(block.complexity)
            if grade >= "C":
                where = f"{path.relative_to(ROOT)}:{block.lineno} {block.fullname}"
                found.append((where, grade, block.complexity))
    return sorted(found, key=lambda each: -each[2])


def main() -> int:
    """Print the blocks graded C or worse; 1 when the budget is broken."""
    blocks = graded(ROOT / "dispatcher")
    worse = [block for block in blocks if block[1] > "C"]
    for where, grade, complexity in blocks:
        print(f"  {grade} ({complexity:2d})  {where}")
    c_blocks = len(blocks) - len(worse)
    print(f"complexity: {c_blocks} blocks graded C (budget {C_BUDGET}),", end=" ")
    print(f"{len(worse)} graded D or worse (budget 0)")
    if worse or c_blocks > C_BUDGET:
        print("complexity: over budget: split the blocks above where they do two things", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
