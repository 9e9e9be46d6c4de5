"""Request schemas: the field tables the parsers check bodies against and /openapi.json shows."""
