"""The component schemas by API area; gateway/openapi/schemas.py joins them."""
