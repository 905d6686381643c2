"""aiocommit's version, as ``pyproject.toml`` declares it.

A test keeps the two equal. Read from here rather than through ``importlib.metadata``,
whose 16 modules a host that does not use them would otherwise load with every commit's
summary (more objects for each of its full garbage collections to walk).
"""

VERSION = "0.1.0"
