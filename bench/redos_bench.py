"""ReDoS: a tenant's ``pattern: "^(a+)+$"`` against ``n`` characters of ``a`` and a ``!``,
on Python's ``re`` (what jsonschema used) and through Relayflow's schema validator (RE2).

Prints milliseconds per check. ``re`` doubles with every character, so it stops at
``--re-max`` characters; RE2 runs every length, up to 100,000.

    .venv/bin/python bench/redos_bench.py [--re-max 22]
"""

from __future__ import annotations

import argparse
import re
import time

from relayflow.definition.tenant_schema import validator

PATTERN = "^(a+)+$"


def best_ms(check, repeats: int = 3) -> float:
    timings = []
    for _ in range(repeats):
        started = time.perf_counter()
        check()
        timings.append((time.perf_counter() - started) * 1000)
    return min(timings)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--re-max", type=int, default=22)
    args = parser.parse_args()
    schema = validator({"type": "string", "pattern": PATTERN})
    print(f"{'chars':>7} {'re (ms)':>10} {'RE2 via schema (ms)':>20}")
    for n in (16, 18, 20, 22, 24, 26, 40, 1_000, 100_000):
        text = "a" * n + "!"
        on_re = (
            f"{best_ms(lambda text=text: re.search(PATTERN, text), 1):10.1f}"
            if n <= args.re_max
            else "   skipped"
        )
        assert not schema.is_valid(text)
        on_re2 = best_ms(lambda text=text: schema.is_valid(text))
        print(f"{n:>7} {on_re} {on_re2:20.3f}")


if __name__ == "__main__":
    main()
