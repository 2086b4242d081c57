"""Shell completion for bash, zsh and fish: the script `majordomus completion SHELL`
prints, and the answers that script asks majordomus for as the user presses Tab.

The script runs `majordomus` with `_MAJORDOMUS_COMPLETE=<shell>_complete` and the words
typed so far in `COMP_WORDS` (and the word under the cursor: `COMP_CWORD`, its index for
bash and zsh, the word itself for fish); `answer` reads them and prints one candidate a
line, `type,value` (bash, fish; fish adds a tab and a description) or `type`, `value`
and a description on three lines (zsh). The scripts are click's (8.x), for majordomus:
typer's own completion (`--install-completion`) loads its machinery, and asks which
shell runs it, on every start of the command line, which a `--version` should not pay.

Commands and their options complete from the declarations; a file (`--file`) or a
directory (`-C`) the shell completes with its own; a parameter of VALUES (by its name:
a task, a REV, a REMOTE, an agent, its event, a scope, a shell) from where its values
are, read only as the user presses Tab, so the declarations carry nothing a start pays
for. A value read from a note or a ref is offered only when it is a plain word: a
teammate's note cannot put a control character on the user's terminal.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from typer._click.core import Context, Parameter
from typer._click.shell_completion import (
    CompletionItem,
    ShellComplete,
    _resolve_context,
    _resolve_incomplete,
    split_arg_string,
)

from majordomus import plaintext
from majordomus.errors import MajordomusError, RefusedError
from majordomus.invocation import Invocation

if TYPE_CHECKING:
    from typer._click.core import Command

PROG = "majordomus"
VARIABLE = "_MAJORDOMUS_COMPLETE"
SHELLS = ("bash", "zsh", "fish")
# The parameters naming a file or a directory: the shell completes them with its own.
PATHS = {"file": "file", "directory": "dir"}
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/@+-]{0,199}")

_BASH = """\
_majordomus_completion() {
    local IFS=$'\\n'
    local response
    response=$(env COMP_WORDS="${COMP_WORDS[*]}" COMP_CWORD=$COMP_CWORD \
_MAJORDOMUS_COMPLETE=bash_complete majordomus)
    for completion in $response; do
        IFS=',' read -r type value <<< "$completion"
        if [[ $type == 'dir' ]]; then
            COMPREPLY=()
            compopt -o dirnames
        elif [[ $type == 'file' ]]; then
            COMPREPLY=()
            compopt -o default
        elif [[ $type == 'plain' ]]; then
            COMPREPLY+=("$value")
        fi
    done
    return 0
}

complete -o nosort -F _majordomus_completion majordomus
"""

_ZSH = """\
#compdef majordomus

_majordomus_completion() {
    local -a completions
    local -a completions_with_descriptions
    local -a response
    (( ! $+commands[majordomus] )) && return 1

    response=("${(@f)$(env COMP_WORDS="${words[*]}" COMP_CWORD=$((CURRENT-1)) \
_MAJORDOMUS_COMPLETE=zsh_complete majordomus)}")

    for type key descr in ${response}; do
        if [[ "$type" == "plain" ]]; then
            if [[ "$descr" == "_" ]]; then
                completions+=("$key")
            else
                completions_with_descriptions+=("$key":"$descr")
            fi
        elif [[ "$type" == "dir" ]]; then
            _path_files -/
        elif [[ "$type" == "file" ]]; then
            _path_files -f
        fi
    done

    if [ -n "$completions_with_descriptions" ]; then
        _describe -V unsorted completions_with_descriptions -U
    fi

    if [ -n "$completions" ]; then
        compadd -U -V unsorted -a completions
    fi
}

if [[ $zsh_eval_context[-1] == loadautofunc ]]; then
    _majordomus_completion "$@"
else
    compdef _majordomus_completion majordomus
fi
"""

_FISH = """\
function _majordomus_completion
    set -l response (env _MAJORDOMUS_COMPLETE=fish_complete COMP_WORDS=(commandline -cp) \
COMP_CWORD=(commandline -t) majordomus)

    for completion in $response
        set -l metadata (string split -m 1 "," -- $completion)

        if test $metadata[1] = "dir"
            __fish_complete_directories $metadata[2]
        else if test $metadata[1] = "file"
            __fish_complete_path $metadata[2]
        else if test $metadata[1] = "plain"
            echo $metadata[2]
        end
    end
end

complete --no-files --command majordomus --arguments "(_majordomus_completion)"
"""

SCRIPTS = {"bash": _BASH, "zsh": _ZSH, "fish": _FISH}


class _Shell(ShellComplete):
    """One shell's side of the protocol, reading the words from `environ`."""

    name = "majordomus"
    source_template = ""

    def __init__(
        self, command: Command, shell: str, environ: Mapping[str, str], obj: Invocation
    ) -> None:
        super().__init__(command, {"obj": obj}, PROG, VARIABLE)
        self.shell = shell
        self.environ = environ

    def source_vars(self) -> dict[str, Any]:
        return {}

    def get_completion_args(self) -> tuple[list[str], str]:
        words = split_arg_string(self.environ.get("COMP_WORDS", ""))
        current = self.environ.get("COMP_CWORD", "")
        if self.shell == "fish":
            incomplete = split_arg_string(current)[0] if current else ""
            args = words[1:]
            if incomplete and args and args[-1] == incomplete:
                args.pop()
            return args, incomplete
        try:
            at = int(current)
        except ValueError:
            at = len(words)
        return words[1:at], words[at] if 0 < at < len(words) else ""

    def get_completions(self, args: list[str], incomplete: str) -> list[CompletionItem]:
        """click's answer, but a file or a directory is the shell's to complete, and a
        parameter of `VALUES` completes to its values (found only as the user presses Tab:
        the declarations carry nothing of completion, which every start would pay for)."""
        ctx = _resolve_context(self.cli, self.ctx_args, self.prog_name, args)
        asked, incomplete = _resolve_incomplete(ctx, args, incomplete)
        name = (asked.name or "") if isinstance(asked, Parameter) else ""
        if name in PATHS:
            return [CompletionItem(incomplete, type=PATHS[name])]
        if name in VALUES:
            found = VALUES[name](_located(ctx), ctx.params)
            return [CompletionItem(value) for value in words(found, incomplete)]
        return asked.shell_complete(ctx, incomplete)

    def format_completion(self, item: CompletionItem) -> str:
        described = _one_line(item.help) if item.help else ""
        if self.shell == "zsh":
            value = str(item.value).replace(":", "\\:")
            return f"{item.type}\n{value}\n{described or '_'}"
        if self.shell == "fish" and described:
            return f"{item.type},{item.value}\t{described}"
        return f"{item.type},{item.value}"


def _one_line(text: str) -> str:
    return " ".join(text.split())


def answer(command: Command, instruction: str, invocation: Invocation) -> int:
    """What the completion script asked for (`instruction`: VARIABLE's value), printed;
    its exit code. An instruction no script of ours sends is refused (exit 2)."""
    shell, _, what = instruction.partition("_")
    if shell not in SHELLS or what != "complete":
        invocation.terminal.stderr.write(
            f"majordomus: {VARIABLE} must be bash_complete, zsh_complete or fish_complete.\n"
        )
        return 2
    completed = _Shell(command, shell, invocation.environ, invocation).complete()
    invocation.terminal.stdout.write(completed + "\n" if completed else "")
    return 0


def words(found: Iterable[str], incomplete: str) -> list[str]:
    """The candidates of `found` that start with `incomplete` and are plain words (a value
    read from a note or a ref is offered only so)."""
    return [word for word in found if word.startswith(incomplete) and _WORD.fullmatch(word)]


def _located(ctx: Context) -> Invocation:
    """The invocation where the line's -C and --profile put it (a completion reads the
    line and runs no callback: the app's own, which does this, has not run)."""
    root = ctx.find_root()
    invocation = root.obj
    assert isinstance(invocation, Invocation)
    return invocation.located(root.params.get("directory") or (), root.params.get("profile"))


def _task_ids(invocation: Invocation, params: Mapping[str, Any]) -> list[str]:
    """The repository's task ids; none outside a repository."""
    from majordomus.tasks import open_here
    from majordomus.views import Views

    try:
        jobs = open_here(invocation.inputs())
        return sorted(Views(jobs.reader, jobs.history).task_ids)
    except (MajordomusError, OSError):
        return []


def _git_lines(invocation: Invocation, *args: str) -> list[str] | None:
    """What git answers, a line each; None outside a repository (or when git fails)."""
    from majordomus.tasks import open_here

    try:
        return open_here(invocation.inputs()).repository.git(*args).stdout.splitlines()
    except (MajordomusError, OSError):
        return None


def _revisions(invocation: Invocation, params: Mapping[str, Any]) -> list[str]:
    """HEAD, the branches (remote-tracking too) and the tags."""
    refs = ("refs/heads", "refs/remotes", "refs/tags")
    found = _git_lines(invocation, "for-each-ref", "--format=%(refname:short)", *refs)
    return [] if found is None else ["HEAD", *found]


def _remotes(invocation: Invocation, params: Mapping[str, Any]) -> list[str]:
    return _git_lines(invocation, "remote") or []


def _agents(invocation: Invocation, params: Mapping[str, Any]) -> Iterable[str]:
    from majordomus import agents

    return agents.AGENTS


def _scopes(invocation: Invocation, params: Mapping[str, Any]) -> Iterable[str]:
    from majordomus import agents

    return agents.SCOPES


def _events(invocation: Invocation, params: Mapping[str, Any]) -> Iterable[str]:
    """The hook events of the agent named before (`hook claude <Tab>`)."""
    from majordomus import agents

    events = agents.EVENTS.get(str(params.get("agent")))
    return events if events is not None else ()


def _shells(invocation: Invocation, params: Mapping[str, Any]) -> Iterable[str]:
    return SHELLS


# The parameters, by name, whose values complete, and where the values come from.
VALUES: Mapping[str, Callable[[Invocation, Mapping[str, Any]], Iterable[str]]] = {
    "task": _task_ids,
    "rev": _revisions,
    "remote": _remotes,
    "agent": _agents,
    "scope": _scopes,
    "event": _events,
    "shell": _shells,
}


def completion_command(invocation: Invocation, shell: str) -> int:
    """`majordomus completion SHELL`: the script printed."""
    if shell not in SCRIPTS:
        raise RefusedError(
            f"no completion for '{plaintext.one_line(shell)}': the shells are bash, zsh and fish."
        )
    invocation.out(SCRIPTS[shell])
    return 0
