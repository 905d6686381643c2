"""Commands found through entry points: ``aiocommit NAME`` runs the click command an
installed package names under the ``aiocommit.commands`` group (aiocommit's own
``stress``, from its ``[stress]`` extra, is one). The command is imported only when it
runs, so ``aiocommit --help`` needs nothing of it; its arguments are passed on whole.
"""

from importlib.metadata import EntryPoint, entry_points

import click

from aiocommit.cli.exits import EXIT_UNAVAILABLE, CommandGroup, fail

GROUP = "aiocommit.commands"


def command_entry_points() -> dict[str, EntryPoint]:
    """The installed ``aiocommit.commands`` entry points, by command name."""
    return {entry.name: entry for entry in entry_points(group=GROUP)}


class EntryPointCommand(click.Command):
    """``aiocommit NAME ARGS...``: loads the entry point's command and runs it on ARGS; a
    package it needs that is missing exits 4 (unavailable) with the install line."""

    def __init__(self, entry: EntryPoint) -> None:
        package = entry.dist.name if entry.dist is not None else entry.module
        super().__init__(
            entry.name,
            context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
            add_help_option=False,
            params=[click.Argument(["args"], nargs=-1, type=click.UNPROCESSED)],
            help=f"The {entry.name} command of {package}; see `aiocommit {entry.name} --help`.",
        )
        self.entry = entry

    def invoke(self, ctx: click.Context) -> None:
        try:
            command = self.entry.load()
        except ImportError as error:
            package = self.entry.dist.name if self.entry.dist is not None else "its package"
            extras = ",".join(self.entry.extras)
            needs = f"{package}[{extras}]" if extras else package
            fail(
                EXIT_UNAVAILABLE,
                f"the {self.entry.name} command needs packages that are not installed "
                f"({error}): pip install '{needs}'",
            )
        if not isinstance(command, click.Command):
            fail(EXIT_UNAVAILABLE, f"{self.entry.value} is not a click command")
        command.main(
            args=list(ctx.params["args"]),
            prog_name=f"aiocommit {self.entry.name}",
            standalone_mode=True,
        )


class EntryPointGroup(CommandGroup):
    """The ``aiocommit`` group, with the commands of ``GROUP`` too (its own commands win)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *command_entry_points()})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        if command is not None:
            return command
        entry = command_entry_points().get(cmd_name)
        return EntryPointCommand(entry) if entry is not None else None
