"""One definition problem: where it is and which rule it broke."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True, order=True)
class Problem:
    file: str | None
    path: str
    rule: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}: " if self.file else ""
        at = self.path or "(document)"
        return f"{where}{at}: {self.message} [{self.rule}]"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class DefinitionError(Exception):
    """Raised when a definition has problems; carries all of them."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        lines = "\n".join(f"  {p}" for p in problems)
        super().__init__(f"{len(problems)} problem(s) in the definition:\n{lines}")
