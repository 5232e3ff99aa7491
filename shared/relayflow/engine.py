"""The engine version, and the ``requires:`` guard a definition declares against it.

A definition may say ``requires: ">=0.3"`` (a PEP 440 version specifier). Validation refuses
it when this engine's version does not satisfy the specifier, naming both versions, so a
definition written for a newer engine never compiles into a machine that would ignore
what it asks for. Every version a workflow publishes records the engine that compiled it,
and every run records it too (``GET /runs/{id}`` shows it).
"""

from __future__ import annotations

from relayflow import __version__

#: The version of this engine (the package version).
ENGINE_VERSION: str = __version__


class BadSpecifier(ValueError):
    """``requires`` is not a version specifier."""


def parse_requirement(spec: str) -> object:
    """The :class:`packaging.specifiers.SpecifierSet` for ``spec``; raises
    :class:`BadSpecifier` with an example when it is not one."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    message = f'\'{spec}\' is not a version specifier; write e.g. ">=0.3" or ">=0.3,<2"'
    if not spec.strip():
        # An empty set matches every version: a guard that guards nothing is a mistake.
        raise BadSpecifier(message)
    try:
        return SpecifierSet(spec.strip())
    except InvalidSpecifier as exc:
        raise BadSpecifier(message) from exc


def unmet_requirement(spec: str, engine_version: str = ENGINE_VERSION) -> str | None:
    """Why ``engine_version`` cannot honour ``spec``, or ``None`` when it can. A
    development or pre-release engine is compared like any version (PEP 440 orders
    ``0.3.0.dev1`` before ``0.3``) instead of being excluded by default."""
    from packaging.specifiers import SpecifierSet

    specifier = parse_requirement(spec)
    assert isinstance(specifier, SpecifierSet)
    if specifier.contains(engine_version, prereleases=True):
        return None
    return (
        f"this definition requires Relayflow {specifier}; this engine is Relayflow {engine_version}"
    )
