"""The HTTP API under /api/v1/ (docs/api.md): photos sent by other programs and machines, their
state, results and reports; scoped tokens, their limits, TLS for other machines, the OpenAPI
document, and the small standard-library client the CLI's `submit` uses."""
