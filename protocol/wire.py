"""The bases every protocol structure and enum derives from, so they all travel alike."""

from __future__ import annotations

from enum import Enum

from msgspec import Struct


class WireStruct(Struct, array_like=True, forbid_unknown_fields=True):
    """On the wire a positional array of the fields (a tagged one led by its tag). Trailing
    fields with defaults may be left out; fields the structure does not have are refused."""


class WireEnum(str, Enum):
    """A string enum: equal to its value, printed as it, on the wire as it."""

    def __str__(self) -> str:
        return str(self.value)
