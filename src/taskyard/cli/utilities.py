"""`taskyard slugid` and `taskyard completion SHELL`: small tools around the other commands.

Completion scripts are generated from the command line's own parser, so they cannot drift from
it: every sub-command and flag completes, after `--task-queue`/`--task-queue-id` the names of
the deployment's task queues, and for the ID of `pool show|update|delete|workers|errors` its
worker pools (both asked with the current credentials; nothing if that fails).
"""

from __future__ import annotations

import argparse
import dataclasses
import shlex
import sys
from collections.abc import Mapping
from typing import Any

from taskyard.model import slugid

COMMANDS = ("slugid", "completion")
SHELLS = ("bash", "zsh", "fish")
QUEUE_FLAGS = ("--task-queue", "--task-queue-id")
# The commands whose ID is a worker pool's: `taskyard completion worker-pools` lists them.
POOL_PATHS = tuple(f"taskyard pool {action}" for action in ("show", "update", "delete", "workers", "errors"))


def add_commands(commands: Any) -> None:
    ids = commands.add_parser("slugid", help="print new slugids (task and task group ids)")
    ids.add_argument("-n", "--count", type=int, default=1, metavar="N", help="how many (default 1)")
    completion = commands.add_parser(
        "completion",
        help="print a shell completion script",
        description="Print the completion script for SHELL. bash: `source <(taskyard completion bash)` "
        "in ~/.bashrc; zsh: `source <(taskyard completion zsh)` in ~/.zshrc; fish: "
        "`taskyard completion fish > ~/.config/fish/completions/taskyard.fish`.",
    )
    completion.add_argument("shell", type=_shell, metavar="SHELL", help="bash, zsh or fish")


# What the scripts themselves call (`taskyard completion task-queues`), not for people: accepted,
# never offered, and left out of the refusal's list.
HIDDEN = ("task-queues", "worker-pools")


def _shell(text: str) -> str:
    if text not in (*SHELLS, *HIDDEN):
        raise argparse.ArgumentTypeError(f"{text!r} is not a shell this supports: bash, zsh or fish")
    return text


def main(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    if args.command == "slugid":
        if args.count < 1:
            print("taskyard: --count must be at least 1", file=sys.stderr)
            return 2
        print("\n".join(slugid.nice() for _ in range(args.count)))
        return 0
    if args.shell == "task-queues":  # what the scripts call to complete a task queue's name
        print("\n".join(task_queues(environ)))
        return 0
    if args.shell == "worker-pools":  # ... and a worker pool's id
        print("\n".join(worker_pools(environ)))
        return 0
    print(script(args.shell))
    return 0


def task_queues(environ: Mapping[str, str]) -> list[str]:
    """The deployment's task queues, or none if it cannot be asked: completion never fails."""
    from taskyard.cli import admin, lists

    try:
        args = argparse.Namespace(**{admin._dest(flag): None for flag, _, _ in admin.CONNECTION})
        connection = admin.connection(args, environ)
        connection = dataclasses.replace(connection, timeout=3.0)
        return [q["taskQueueId"] for q in lists.pages(connection, "/task-queues", "taskQueues")]
    except Exception:
        return []


def worker_pools(environ: Mapping[str, str]) -> list[str]:
    """The deployment's worker pools, or none if it cannot be asked: completion never fails."""
    from taskyard.cli import admin, pool_commands

    try:
        args = argparse.Namespace(**{admin._dest(flag): None for flag, _, _ in admin.CONNECTION})
        connection = admin.connection(args, environ)
        connection = dataclasses.replace(connection, timeout=3.0)
        pools = pool_commands.pages(connection, "/worker-pools", "workerPools")
        return [p["workerPoolId"] for p in pools if p["providerId"] != pool_commands.DELETED]
    except Exception:
        return []


def words() -> dict[str, list[str]]:
    """For each command path (`taskyard`, `taskyard task` ...): the words that may follow it."""
    from taskyard.cli.main import parser

    table: dict[str, list[str]] = {}

    def walk(path: str, each: argparse.ArgumentParser) -> None:
        found: list[str] = []
        for action in each._actions:
            found += [
                o for o in action.option_strings if o.startswith("--") or len(action.option_strings) == 1
            ]
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    found.append(name)
                    walk(f"{path} {name}", sub)
            elif action.choices and not action.option_strings:
                found += [str(c) for c in action.choices]
            elif action.type is _shell:
                found += list(SHELLS)
        table[path] = found

    walk("taskyard", parser())
    return table


def script(shell: str) -> str:
    table = words()
    if shell == "fish":
        return _fish(table)
    entries = "\n".join(f"  [{shlex.quote(path)}]={shlex.quote(' '.join(w))}" for path, w in table.items())
    bash = (
        BASH.replace("@ENTRIES@", entries)
        .replace("@QUEUE_FLAGS@", "|".join(QUEUE_FLAGS))
        .replace("@POOL_PATHS@", "|".join(shlex.quote(p) for p in POOL_PATHS))
    )
    return ZSH_PREAMBLE + bash if shell == "zsh" else bash


BASH = """# taskyard completion for bash (and zsh through bashcompinit)
declare -gA _taskyard_words=(
@ENTRIES@
)
_taskyard() {
  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} path=taskyard w next
  case "$prev" in
    @QUEUE_FLAGS@)
      COMPREPLY=( $(compgen -W "$(taskyard completion task-queues 2>/dev/null)" -- "$cur") ); return;;
  esac
  for w in "${COMP_WORDS[@]:1:COMP_CWORD-1}"; do
    next="$path $w"
    [[ -n "${_taskyard_words[$next]+x}" ]] && path=$next
  done
  case "$path" in
    @POOL_PATHS@)
      if [[ "$cur" != -* && "$prev" != -* ]]; then
        COMPREPLY=( $(compgen -W "$(taskyard completion worker-pools 2>/dev/null)" -- "$cur") ); return
      fi;;
  esac
  COMPREPLY=( $(compgen -W "${_taskyard_words[$path]}" -- "$cur") )
}
complete -F _taskyard taskyard
"""
ZSH_PREAMBLE = """# taskyard completion for zsh: bash's, through bashcompinit
autoload -U +X compinit && compinit
autoload -U +X bashcompinit && bashcompinit
"""


def _fish(table: dict[str, list[str]]) -> str:
    lines = [
        "# taskyard completion for fish",
        "function __taskyard_path",
        "    set -l known " + " ".join(shlex.quote(p) for p in table),
        "    set -l path taskyard",
        "    for w in (commandline -opc)[2..-1]",
        '        set -l next "$path $w"',
        "        contains -- $next $known; and set path $next",
        "    end",
        "    echo $path",
        "end",
        "complete -c taskyard -f",
        "complete -c taskyard -n 'contains -- (commandline -opc)[-1] --task-queue --task-queue-id' "
        "-a '(taskyard completion task-queues 2>/dev/null)'",
        "complete -c taskyard -n "
        + shlex.quote(
            "contains -- (__taskyard_path) "
            + " ".join(shlex.quote(p) for p in POOL_PATHS)
            + "; and not string match -q -- '-*' (commandline -opc)[-1]"
        )
        + " -a '(taskyard completion worker-pools 2>/dev/null)'",
    ]
    for path, found in table.items():
        condition = f"test (__taskyard_path) = {shlex.quote(path)}"
        lines.append(f"complete -c taskyard -n {shlex.quote(condition)} -a {shlex.quote(' '.join(found))}")
    return "\n".join(lines)
