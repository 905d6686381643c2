"""The test tiers for every test directory (tests/, stress/tests/): see tests/tiers.py;
the checkout's sources compiled before the run: tests/bytecode.py."""

pytest_plugins = ["tests.tiers", "tests.bytecode"]
