"""flagsight Python SDK."""
