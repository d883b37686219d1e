"""Find the first validator whose name regex fits a key, without trying all 525 regexes.

Nova scans the whole registry in order for every key it cannot find by exact name (about 0.5 ms
for a trait key). The answer must stay identical: the validator registered first among those whose
regex fullmatches. The index relies on one property, checked when it is built: the part of every
name regex before its first ':' (the namespace) cannot itself match ':'. So the key's text before
its first ':' must fullmatch that namespace, and its text after must match the rest.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from openkeel_compute.extra_specs.model import Validator

# A tail made only of these characters is plain text, so "matches" means "equals".
_LITERAL_TAIL = re.compile(r"[A-Za-z0-9_:-]*")
# Constructs that could let a namespace regex match ':' (and so break the split above).
_COLON_CAPABLE = (":", ".", "\\W", "\\S", "\\D", "[^")

Ranked = tuple[int, Validator]  # registration position, validator


class _Namespace:
    """The validators of one namespace regex, split into plain-text tails and regex tails."""

    def __init__(self, namespace_regex: str) -> None:
        if any(construct in namespace_regex for construct in _COLON_CAPABLE):
            raise ValueError(f"namespace regex {namespace_regex!r} might match ':'; the lookup index is unsafe")
        self.pattern = re.compile(namespace_regex)
        self.by_tail: dict[str, Ranked] = {}
        self.regex_tails: list[Ranked] = []

    def add(self, position: int, validator: Validator, tail_regex: str) -> None:
        if _LITERAL_TAIL.fullmatch(tail_regex):
            self.by_tail.setdefault(tail_regex, (position, validator))
        else:
            self.regex_tails.append((position, validator))

    def first_match(self, key: str, tail: str) -> Ranked | None:
        best = self.by_tail.get(tail)
        for position, validator in self.regex_tails:
            if best is not None and position > best[0]:
                break  # registered later than the plain-text hit: cannot win
            if validator.compiled_name.fullmatch(key):
                return position, validator
        return best


class ValidatorIndex:
    """Answers "first validator in registration order whose name regex fullmatches the key"."""

    def __init__(self, validators: Iterable[Validator]) -> None:
        self._namespaces: dict[str, _Namespace] = {}
        self._without_namespace: list[Ranked] = []
        for position, validator in enumerate(validators):
            if ":" not in validator.name_regex:
                self._without_namespace.append((position, validator))
                continue
            namespace_regex, tail_regex = validator.name_regex.split(":", 1)
            namespace = self._namespaces.get(namespace_regex)
            if namespace is None:
                namespace = self._namespaces[namespace_regex] = _Namespace(namespace_regex)
            namespace.add(position, validator, tail_regex)

    def first_match(self, key: str) -> Validator | None:
        """The validator Nova's linear scan would pick for ``key``, or None."""
        found: list[Ranked] = [
            ranked for ranked in self._without_namespace if ranked[1].compiled_name.fullmatch(key)
        ][:1]
        if ":" in key:
            prefix, tail = key.split(":", 1)
            for namespace in self._namespaces.values():
                if namespace.pattern.fullmatch(prefix):
                    hit = namespace.first_match(key, tail)
                    if hit is not None:
                        found.append(hit)
        return min(found, key=lambda ranked: ranked[0])[1] if found else None
