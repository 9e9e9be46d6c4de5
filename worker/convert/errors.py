"""The one error a conversion raises for a source it cannot convert (and says why)."""


class ConversionError(ValueError):
    """The source is malformed or uses something the converter does not support."""
