"""The test tiers for every test directory (tests/, stress/tests/): see tests/tiers.py."""

pytest_plugins = ["tests.tiers"]
