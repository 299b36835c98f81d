"""`taskyard`: serve the queue, run everything at once with `up`, or manage clients and roles."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import logging
import os
import sys
from collections.abc import Callable, Coroutine, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from taskyard import __version__
from taskyard.auth import static
from taskyard.cli import options
from taskyard.cli.startup import STARTUP_FAILURE, StartupFailed
from taskyard.config import ServerConfig
from taskyard.lockfile import InUse
from taskyard.model.errors import ConfigError, TaskyardError

if TYPE_CHECKING:
    from taskyard.pools.own import OwnPool

T = TypeVar("T")
# The data or work directory is held by another live taskyard process: nothing was done.
EXIT_IN_USE = 3
# Ctrl-C, and a reader that closed our standard output: as a shell reports a process those
# signals ended (128 + SIGINT, 128 + SIGPIPE), without a traceback.
EXIT_INTERRUPTED = 130
EXIT_CLOSED_PIPE = 141
# The commands that run a server: theirs is the only parser built to run one (see `parser()`).
SERVER_COMMANDS = ("serve", "up")


def api_commands() -> tuple[str, ...]:
    """Commands that call a deployment's API with the TASKCLUSTER_* credentials (see `admin.main`)."""
    from taskyard.cli import admin, graphs, hook_commands, index, pool_commands, secret_commands, tasks
    from taskyard.cli import notify as notify_cli

    return (
        *admin.COMMANDS,
        *tasks.COMMANDS,
        *graphs.COMMANDS,
        *index.COMMANDS,
        *notify_cli.COMMANDS,
        *secret_commands.COMMANDS,
        *hook_commands.COMMANDS,
        *pool_commands.COMMANDS,
        "queue",
        "api",
    )


def parser(command: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser. Given `command`, one of `SERVER_COMMANDS` about to run, only its
    own sub-command's parser is built: it parses that command's arguments, and answers their
    errors and `--help`, as the whole parser would, without the other commands' modules and
    parsers, which a server's start would otherwise wait for."""
    top = argparse.ArgumentParser(prog="taskyard", description="TaskCluster's queue, small and fast.")
    top.add_argument("--version", action="version", version=f"taskyard {__version__}")
    # `taskyard --context w2 queue list`: as after the sub-command (its own dest: a sub-command's
    # default would overwrite it), for every command that calls the API.
    top.add_argument("--context", dest="top_context", metavar="NAME", help="as a command's --context")
    commands = top.add_subparsers(dest="command", required=True)
    if command in (None, "serve"):
        serve = commands.add_parser("serve", help="run the queue API and its background resolvers")
        options.add_declared(serve, "serve")
    if command in (None, "up"):
        _add_up(commands)
    if command is None:
        _add_other_commands(commands)
    for each in parsers(top):  # an unknown flag is reported with the usage of its own sub-command
        each.set_defaults(_parser=each)
    return top


def _add_up(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    up = commands.add_parser(
        "up",
        help="run the server with a pool of worker processes beside it, on SQLite by default",
        description="Run the queue's server (as `serve`) and, beside it as child processes, a local "
        "worker pool on --task-queue-id: one worker (as `taskyard worker`) always ready, more as "
        "tasks wait, up to --capacity (the machine's cores), each beyond the first stopped after "
        "five minutes without work; each registers for credentials of its own, in "
        "DATA_DIR/workers. --capacity 0 runs no worker. Ctrl-C stops the workers first (their "
        "running tasks are resolved worker-shutdown), then the server.",
    )
    options.add_declared(up, "up")


def _add_other_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from taskyard.cli import (
        admin,
        api_call,
        contexts,
        db,
        graphs,
        hook_commands,
        index,
        lists,
        pool_commands,
        secret_commands,
        tasks,
        utilities,
    )
    from taskyard.cli import events as events_cli
    from taskyard.cli import notify as notify_cli
    from taskyard.cli import worker as worker_cli

    worker_cli.add_command(commands)
    lists.add_worker_list(commands.choices["worker"])
    admin.add_commands(commands)
    tasks.add_commands(commands)
    graphs.add_commands(commands)
    index.add_commands(commands)
    notify_cli.add_commands(commands)
    secret_commands.add_commands(commands)
    hook_commands.add_commands(commands)
    pool_commands.add_commands(commands)
    lists.add_queue_command(commands, admin.connection_options())
    api_call.add_command(commands, admin.connection_options())
    db.add_commands(commands)
    events_cli.add_command(commands)
    utilities.add_commands(commands)
    contexts.add_commands(commands, admin.connection_options())


def parsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """`parser` and every sub-command's parser under it."""
    found = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):
                found += parsers(sub)
    return found


def _email_line(smtp_url: str) -> str:
    """Where email goes, without the URL's credentials."""
    if not smtp_url:
        return "email off: no --smtp-url"
    from taskyard.notify.mail import parse_url

    smtp = parse_url(smtp_url)
    return f"email through {smtp.host}:{smtp.port}"


def banner(config: ServerConfig, pool: OwnPool | None = None) -> str:
    running = []
    if config.processes > 1:
        running.append(f"  processes:     {config.processes} API processes on this port")
    if pool is not None:
        workers = (
            f"{pool.min_capacity} to {pool.max_capacity} worker(s)" if pool.max_capacity > 1 else "1 worker"
        )
        where = Path(config.data_dir, "workers").absolute()
        running.append(f"  worker pool:   {pool.worker_pool_id} (local): {workers}, in {where}")
    return "\n".join(
        [
            f"taskyard {__version__} is serving the queue",
            f"  root URL:      {config.root_url}",
            f"  web UI:        {config.root_url}/",
            f"  queue API:     {config.root_url}/api/queue/v1/",
            f"  auth API:      {config.root_url}/api/auth/v1/",
            f"  index API:     {config.root_url}/api/index/v1/",
            f"  secrets API:   {config.root_url}/api/secrets/v1/",
            f"  hooks API:     {config.root_url}/api/hooks/v1/",
            f"  notify API:    {config.root_url}/api/notify/v1/ ({_email_line(config.smtp_url)})",
            f"  pools API:     {config.root_url}/api/worker-manager/v1/",
            f"  events:        {config.root_url}/api/events/v1/stream",
            f"  database:      {config.db_url}",
            *running,
            "  root credentials (use them with any TaskCluster client):",
            f"    export TASKCLUSTER_ROOT_URL={config.root_url}",
            f"    export TASKCLUSTER_CLIENT_ID={static.ROOT_CLIENT_ID}",
            f"    export TASKCLUSTER_ACCESS_TOKEN={config.root_access_token}",
            "  stop with Ctrl-C",
        ]
    )


def run(main: Coroutine[Any, Any, T]) -> T:
    """Run on uvloop where it is installed (it is a dependency), else on asyncio's own loop."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(main)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(main)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command `argv` names; Ctrl-C and a closed pipe end it quietly, as other tools do."""
    try:
        try:
            return _main(argv)
        finally:
            sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's last words
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # Nobody reads what is left: send it nowhere, so that exiting flushes nothing into the pipe.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_CLOSED_PIPE


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def log_level(env: Mapping[str, str]) -> str:
    """TASKYARD_LOG_LEVEL, upper-cased; a name logging does not know is a `ConfigError`."""
    level = env.get("TASKYARD_LOG_LEVEL", "INFO")
    if level.upper() not in LOG_LEVELS:
        raise ConfigError("TASKYARD_LOG_LEVEL", level, f"must be one of {', '.join(LOG_LEVELS)}")
    return level.upper()


def _client_command(args: argparse.Namespace) -> int | None:
    """Run a command that is neither a server nor a worker; None for those."""
    if args.command in SERVER_COMMANDS:
        return None
    from taskyard.cli import admin, contexts, db, utilities
    from taskyard.cli import events as events_cli

    if args.command in api_commands() or (args.command == "worker" and args.action == "list"):
        return admin.main(args, os.environ)
    if args.command in contexts.COMMANDS:
        return contexts.main(args, os.environ)
    if args.command in utilities.COMMANDS:
        return utilities.main(args, os.environ)
    if args.command in db.COMMANDS:
        return db.main(args, os.environ)
    if args.command == "events":
        return events_cli.main(args, os.environ)
    return None


def _main(argv: Sequence[str] | None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    # A sub-command's name comes first (the top-level options take no value): `serve` and `up`
    # parse with a parser of their own, the others with the whole one.
    command = argv[0] if argv and argv[0] in SERVER_COMMANDS else None
    args, unknown = parser(command).parse_known_args(argv)
    if unknown:
        args._parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    _context_before_the_command(args)
    dispatched = _client_command(args)
    if dispatched is not None:
        return dispatched
    return exit_status(lambda: _serve_or_work(args))


def _context_before_the_command(args: argparse.Namespace) -> None:
    """`taskyard --context NAME COMMAND ...`: the command's own --context, given after it, wins."""
    given = getattr(args, "top_context", None)
    if given is None:
        return
    if not hasattr(args, "context"):
        args._parser.error("--context applies only to commands that call the API")
    if args.context is None:
        args.context = given


def exit_status(command: Callable[[], int]) -> int:
    """Run `command`; what stops it for a reason of the operator's is a line or two on stderr and
    an exit status: 3 for a start-up failure or a directory in use, 2 for a configuration error."""
    try:
        return command()
    except (InUse, StartupFailed) as exc:  # what to do is in the message, a line or two
        for line in exc.message.splitlines():
            print(f"taskyard: {line}", file=sys.stderr)
        return EXIT_IN_USE if isinstance(exc, InUse) else STARTUP_FAILURE
    except ConfigError as exc:
        print(f"taskyard: {exc.message}", file=sys.stderr)
        return 2
    except TaskyardError as exc:
        print(f"taskyard: {exc.message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0


def _serve_or_work(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=log_level(os.environ),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if args.command == "worker":
        from taskyard.cli import worker as worker_cli

        # asyncio's own loop: it spawns commands with vfork, uvloop (libuv) with a full fork
        # of the worker, 3 ms apiece, which for short tasks outweighs uvloop's faster I/O.
        return asyncio.run(worker_cli.run_worker(worker_cli.worker_config(args, os.environ)))
    values = options.resolve(args, os.environ)
    lock = options.lock_data_dir(args.command, values)
    try:
        config = options.server_config(values, os.environ)
        with paused_collector():  # the server's modules
            from taskyard.cli.serve import serve

        if config.processes > 1:
            return _serve_processes(config)
        pool = None
        if args.command == "up":
            from taskyard.cli import worker as worker_cli

            pool = worker_cli.own_pool(config, values)
        run(serve(config, banner=banner(config, pool), own_pool=pool, lock=lock))
    finally:
        if lock is not None:
            lock.release()
    return 0


@contextlib.contextmanager
def paused_collector() -> Iterator[None]:
    """Pause the cyclic garbage collector, as while importing the server: its modules make tens
    of thousands of objects that all live on, and collecting meanwhile only walks them again and
    again (a tenth of the import's CPU time). Nothing is lost: it collects as before once resumed."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _serve_processes(config: ServerConfig) -> int:
    """`serve --processes N`: bind and migrate once, then fork the API processes."""
    from taskyard.cli.processes import serve_processes
    from taskyard.cli.serve import bind, migrate, serve

    listening = bind(config.host, config.port)
    try:
        run(migrate(config))

        def child(index: int) -> int:
            for handler in logging.getLogger().handlers:
                handler.setFormatter(
                    logging.Formatter(f"%(asctime)s %(levelname)s [api {index}] %(name)s: %(message)s")
                )
            shown = banner(config) if index == 0 else None
            return exit_status(lambda: run(serve(config, banner=shown, listening=listening)) or 0)

        return serve_processes(config.processes, child)
    finally:
        listening.close()


if __name__ == "__main__":
    sys.exit(main())
