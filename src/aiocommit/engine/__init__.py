"""The engine: options, store operations with limits and retries, and the public API."""
