"""The ``with`` protocol the local runtime's servers share: leaving the block closes them."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from types import TracebackType
from typing import Self


class ClosedOnExit(ABC):
    """A context manager that :meth:`close` ends, however its ``with`` block ends."""

    @abstractmethod
    def close(self) -> None:
        """Release what the object holds; safe to call when it is already closed."""

    def opened_by(self, opening: Callable[[], None]) -> Self:
        """The object once ``opening`` (what ``__enter__`` does to open it) has run; when it
        raises, what it opened so far is closed (:meth:`close`) and the error goes on."""
        try:
            opening()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class OpenedInWith(ClosedOnExit):
    """A :class:`ClosedOnExit` that entering the ``with`` block opens (:meth:`open`)."""

    @abstractmethod
    def open(self) -> None:
        """Acquire what the object serves with."""

    def __enter__(self) -> Self:
        self.open()
        return self
