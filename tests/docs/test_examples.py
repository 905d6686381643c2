"""Docs as tests: every fenced shell and Python example of README.md and docs/**/*.md is
run as written (placeholders such as ``DEST`` and ``JOB_ID`` given a real local job), or
skipped for a reason listed here as data. A run fails when it exits non-zero or prints a
traceback.

Each example runs in a new process: ``aiocommit`` and ``python`` from this interpreter's
directory, or from ``AIOCOMMIT_DOCS_BIN`` (``scripts/wheel_check.sh`` points it at the
fresh venv the wheel was installed into, outside the checkout). It starts no emulator:
the cloud examples are in ``SKIPPED``. In the slow tier (``pytest -m docs_examples`` runs
just these).
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest

from aiocommit import commit_job
from aiocommit.stores.local import LocalStore
from aiocommit_testing.child_server import start_announcing, stop_process
from tests.helpers import run_tasks

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
SHELLS = ("bash", "sh", "shell", "console")
PYTHONS = ("python", "py")
#: the slow tier: a new process per example, tens of seconds in all
pytestmark = [pytest.mark.docs_examples, pytest.mark.slow]

BIN = Path(os.environ.get("AIOCOMMIT_DOCS_BIN") or Path(sys.executable).parent)

#: a command (after placeholders are filled) that starts with one of these is skipped,
#: for the reason given: the reasons a shell line is not run
SKIPPED_COMMANDS: dict[str, str] = {
    "bash scripts/": "runs a project script from the checkout (the demo and the test suite)",
    "pip install": "installs packages; scripts/wheel_check.sh installs the wheel in a fresh venv",
    "export ": "sets a credential or endpoint of a cloud account or emulator",
    ".venv/bin/mkdocs": "builds the site; tests/docs/test_site.py runs mkdocs build --strict",
    ".venv/bin/python -m aiocommit_stress.spark_bench": "a Spark benchmark of minutes",
    "python -m aiocommit_stress.spark_bench": "a Spark benchmark of minutes",
    ".venv/bin/python -m aiocommit_stress.engine_bench": "an engine benchmark of minutes",
    "python -m aiocommit_stress bench": "a benchmark of minutes; stress/tests cover the harness",
    "python -m aiocommit_stress job": "a stress job on S3 (moto); stress/tests cover it",
    "aiocommit stress chaos": "a chaos run of minutes on fake-gcs-server",
    "aiocommit show reports/": "reads a summary report the example's own commit did not write",
}

#: a command with one of these flags is skipped, for the reason given
SKIPPED_FLAGS: dict[str, str] = {
    "--uploads": "S3's multipart uploads: needs an S3 destination (tests/cli/test_s3_jobs.py)",
}

#: a line naming a cloud URL is skipped: it needs that account, unless the same block
#: started the emulator of that store (see ``EMULATORS``)
CLOUD_URL = re.compile(r"\b(s3a?|gs|abfss?)://")
#: an emulator a block starts (``python -m aiocommit_testing.gcs_emulator --port 4443``):
#: run in the background on a free port (``--port 0``) until the block ends; the names it
#: announces go into the block's environment (its ``export`` of them is not run: the
#: port differs), and its store's URLs then run
EMULATOR = re.compile(r"^python -m aiocommit_testing\.(adls|gcs)_emulator\b")
EMULATORS: dict[str, tuple[str, ...]] = {
    "adls": ("AIOCOMMIT_ADLS_ENDPOINT", "AZURE_STORAGE_ACCOUNT_KEY"),
    "gcs": ("STORAGE_EMULATOR_HOST",),
}
#: the store of each cloud URL scheme
SCHEMES = {"gs": "gcs", "abfs": "adls", "abfss": "adls", "s3": "s3", "s3a": "s3"}

#: Python examples skipped, by page and first line of the block: the reason
SKIPPED_PYTHON: dict[tuple[str, str], str] = {
    ("README.md", "from aiocommit.integrations.spark import register"): "needs Spark (a JVM)",
    ("docs/spark.md", "*"): "needs Spark (a JVM); tests/spark runs these writes",
    ("docs/stores/s3.md", "from aiocommit import CommitOptions, commit_job"): (
        "needs an S3 bucket (tests/s3 runs the S3 committers on moto)"
    ),
}

#: placeholders of the examples -> what they become (``{dest}``: a directory holding a
#: set-up job with committed tasks, ``{job}``: its ID, ``{tmp}``: a scratch directory)
PLACEHOLDERS: list[tuple[str, str]] = [
    ("file:///tmp/aiocommit-example", "file://{tmp}/example"),
    ("file:///tmp/aiocommit-client-example", "file://{tmp}/client-example"),
    ("file:///tmp/out", "file://{dest}"),
    ("/tmp/out", "{dest}"),
    ("/data/out", "{dest}"),
    ("DEST", "{dest}"),
    ("JOB_ID", "{job}"),
    ("JOB", "{job}"),
    ("--job-id ID", "--job-id {job}"),
]

#: optional parts of a synopsis (``[--json]``, ``[OPTIONS]``): dropped, the rest runs
OPTIONAL = re.compile(r"\s\[[^\]]*\](?:\s*\.\.\.)?")


@dataclass(frozen=True)
class Example:
    page: str
    line: int
    language: str
    text: str

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"


def examples() -> list[Example]:
    """Every fenced shell and Python block of the pages."""
    found = []
    fence = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.S | re.M)
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for match in fence.finditer(text):
            language = match.group(1).lower()
            if language in SHELLS or language in PYTHONS:
                line = text[: match.start()].count("\n") + 1
                name = page.relative_to(ROOT).as_posix()
                found.append(Example(name, line, language, match.group(2)))
    return found


def _substitute(text: str, dest: str, job: str, tmp: str) -> str:
    for placeholder, value in PLACEHOLDERS:
        value = value.format(dest=dest, job=job, tmp=tmp)
        text = re.sub(rf"(?<![\w/.-]){re.escape(placeholder)}(?![\w-])", value, text)
    return text


def shell_commands(example: Example) -> list[str]:
    """The block's commands: comments and prompts stripped, a line ending in ``\\`` joined
    with the next, optional parts dropped."""
    commands = []
    continued = ""
    for raw in example.text.splitlines():
        line = raw.strip().removeprefix("$ ")
        if not continued and (not line or line.startswith("#")):
            continue
        line = continued + re.sub(r"\s+#.*$", "", line)
        if line.endswith("\\"):
            continued = line.removesuffix("\\").rstrip() + " "
            continue
        continued = ""
        commands.append(OPTIONAL.sub("", line))
    return commands


def skip_reason(command: str, emulated: frozenset[str] = frozenset()) -> str | None:
    """Why ``command`` is not run, or None; ``emulated``: the stores whose emulator the
    block started (their URLs and the exports of what they announced run)."""
    if command.startswith("export ") and emulated:
        name = command.removeprefix("export ").partition("=")[0]
        if any(name in EMULATORS[store] for store in emulated):
            return "sets what the emulator the block started announced (on another port)"
    for prefix, reason in SKIPPED_COMMANDS.items():
        if command.startswith(prefix):
            return reason
    for flag, reason in SKIPPED_FLAGS.items():
        if flag in command.split():
            return reason
    schemes = {SCHEMES[found] for found in CLOUD_URL.findall(command)}
    if schemes - emulated:
        return "names a cloud URL: needs that account"
    if "TASK-manifest" in command:
        return "names a task manifest by its task ID, which the text leaves open"
    if "| jq" in command and shutil.which("jq") is None:
        return "pipes into jq, which is not installed"
    return None


#: a Python block without an import is a fragment (``await commit_job(dest, job_id,
#: options=...)``): it runs with ``aiocommit``'s public names, ``dest`` and ``job_id``;
#: one of a Spark ``DataFrame`` (``df.write``, ``writeStream``) needs Spark
SPARK_FRAGMENT = re.compile(r"\.(write|writeStream)\b")


def is_fragment(example: Example) -> bool:
    return not re.search(r"^\s*(import|from) \w", example.text, re.M)


def python_skip(example: Example) -> str | None:
    if is_fragment(example) and SPARK_FRAGMENT.search(example.text):
        return "a fragment of a Spark DataFrame's write: needs Spark (a JVM)"
    first = example.text.strip().splitlines()[0]
    for (page, start), reason in SKIPPED_PYTHON.items():
        if page == example.page and (start == "*" or first.startswith(start)):
            return reason
    engines = sorted(
        set(re.findall(r"^\s*(?:import|from) (dask|distributed|ray|polars)\b", example.text, re.M))
    )
    missing = [name for name in engines if importlib.util.find_spec(name) is None]
    if missing:
        return f"needs {', '.join(missing)} (an engine extra), not installed here"
    if "opentelemetry" in example.text:
        try:
            found = importlib.util.find_spec("opentelemetry.exporter.otlp") is not None
        except ModuleNotFoundError:  # its parent package is missing too
            found = False
        if not found:
            return "needs opentelemetry-exporter-otlp, not installed here"
    return None


def _job(tmp: Path) -> tuple[str, str]:
    """A destination as the examples expect one: the ``_SUCCESS`` of a committed job
    (for ``show``), and a set-up job whose tasks committed (for ``jobs``, ``commit``,
    ``abort``, ``cleanup``); returns (its path, the set-up job's ID)."""
    dest = tmp / "dest"
    dest.mkdir()

    async def prepare() -> str:
        store = LocalStore()
        earlier, _ = await run_tasks(store, str(dest), 1, 2)
        await commit_job(str(dest), earlier, store=store)
        for path in dest.iterdir():  # its output gone: the next job's names are free
            if path.name != "_SUCCESS":
                shutil.rmtree(path)
        job_id, _ = await run_tasks(store, str(dest), 2, 3)
        return job_id

    return str(dest), anyio.run(prepare)


def _env() -> dict[str, str]:
    env = {**os.environ, "COLUMNS": "200", "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    env.pop("AIOCOMMIT_LOG_LEVEL", None)
    return env


def _check(result: subprocess.CompletedProcess[str], what: str) -> None:
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"{what}: exit {result.returncode}\n{output}"
    assert "Traceback" not in output, f"{what}: printed a traceback\n{output}"


SHELL_EXAMPLES = [e for e in examples() if e.language in SHELLS]
PYTHON_EXAMPLES = [e for e in examples() if e.language in PYTHONS]


@pytest.mark.parametrize("example", SHELL_EXAMPLES, ids=lambda e: e.id)
def test_shell_example(example: Example, tmp_path: Path) -> None:
    dest, job_id = _job(tmp_path)
    env = _env()
    emulated: set[str] = set()
    servers = []
    ran = []
    try:
        for command in shell_commands(example):
            filled = _substitute(command, dest, job_id, str(tmp_path))
            started = EMULATOR.match(filled)
            if started:
                servers.append(_start_emulator(started.group(1), filled, env))
                emulated.add(started.group(1))
                ran.append(command)
                continue
            if skip_reason(filled, frozenset(emulated)) is not None:
                continue
            words = shlex.split(filled)
            if words[0] == "python":
                words[0] = _python()
            result = subprocess.run(
                ["bash", "-o", "pipefail", "-c", shlex.join(words)]
                if "|" not in filled
                else ["bash", "-o", "pipefail", "-c", filled],
                capture_output=True,
                text=True,
                timeout=120,
                env=env,
                cwd=tmp_path,
            )
            _check(result, f"{example.id}: {command}")
            ran.append(command)
    finally:
        for server in servers:
            stop_process(server)
    if not ran:
        reasons = {skip_reason(_substitute(c, dest, job_id, "")) for c in shell_commands(example)}
        pytest.skip(f"{example.id}: " + "; ".join(sorted(r for r in reasons if r)))


def _python() -> str:
    return str(BIN / "python") if (BIN / "python").exists() else sys.executable


def _start_emulator(store: str, command: str, env: dict[str, str]) -> subprocess.Popen[str]:
    """The emulator of ``command`` started on a free port; what it announces (the names
    the docs say it prints: ``EMULATORS``) put into ``env``."""
    words = shlex.split(re.sub(r"--port \d+", "--port 0", command))
    names = EMULATORS[store]
    process, announced = start_announcing(
        [_python(), *words[1:]], lambda found: all(n in found for n in names), env=env
    )
    env.update({name: announced[name] for name in names})
    return process


RUNNER = """
import ast, asyncio, sys
source = open(sys.argv[1], encoding="utf-8").read()
code = compile(source, sys.argv[1], "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
namespace = {"__name__": "__main__", "dest": sys.argv[2], "job_id": sys.argv[3]}
if sys.argv[4:] == ["fragment"]:
    import aiocommit
    namespace.update({name: getattr(aiocommit, name) for name in aiocommit.__all__})
result = eval(code, namespace)
if asyncio.iscoroutine(result):
    asyncio.run(result)
"""


@pytest.mark.parametrize("example", PYTHON_EXAMPLES, ids=lambda e: e.id)
def test_python_example(example: Example, tmp_path: Path) -> None:
    reason = python_skip(example)
    if reason is not None:
        pytest.skip(f"{example.id}: {reason}")
    dest, job_id = _job(tmp_path)
    source = tmp_path / "example.py"
    source.write_text(_substitute(example.text, dest, job_id, str(tmp_path)), encoding="utf-8")
    ast.parse(source.read_text(encoding="utf-8"), feature_version=(3, 11), type_comments=False)
    result = subprocess.run(
        [_python(), "-c", RUNNER, str(source), dest, job_id]
        + (["fragment"] if is_fragment(example) else []),
        capture_output=True,
        text=True,
        timeout=120,
        env=_env(),
        cwd=tmp_path,
    )
    _check(result, example.id)


def test_every_example_is_found() -> None:
    # a fence this module does not see would never run: the counts move with the docs
    assert len(SHELL_EXAMPLES) >= 30 and len(PYTHON_EXAMPLES) >= 12
    assert {e.page for e in SHELL_EXAMPLES} >= {"docs/cli.md", "docs/troubleshooting.md"}


def test_a_line_continued_with_a_backslash_is_one_command() -> None:
    example = Example("x.md", 1, "bash", "$ aiocommit show \\\n    --files 3 URL  # note\necho b\n")
    assert shell_commands(example) == ["aiocommit show --files 3 URL", "echo b"]
