"""The SDK's version (its own module, so the package and its modules import it without a cycle)."""

__version__ = "0.1.0"
