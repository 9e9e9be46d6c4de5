"""A request's remote MCP tools, run by the gateway in rounds with the model: shared by the APIs
that take them (the Responses API, chat completions' extension). Above gateway/mcp/ (the
servers the operator allows and the connections to them).
"""
