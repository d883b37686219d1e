"""What a command run in the emulated guest does: a login shell (bash on Ubuntu 24.04) over the guest's files.

The guest's files are its boot disk's: a directory per disk (``Disk``) that the built-in cluster keeps with its
state, so that what a guest writes is still there after a reboot, a stop and start or a restart of the cluster,
and gone when the disk is (a rebuild makes a new disk, so does a DataVolume imported again). What is not on a
fresh disk is what a cloud image has not written yet: the user's home appears at the first login, as
cloud-init makes it.

The shell understands what tools like Tempest send over SSH: lists of simple commands joined by ``;``, ``&&``
and ``||``, ``set`` (``-e`` stops at the first failure, as bash does), variable assignments, ``>`` and ``>>``
redirections, and the commands ``true false echo touch cat rm mkdir ls pwd hostname whoami id uname sudo``.
Any other command is ``command not found`` (127). Messages are GNU coreutils' and bash's own words.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import posixpath
import shlex
import shutil
from collections.abc import Callable

UNAME = "Linux"
KERNEL = "6.8.0-45-generic"
BASE_DIRECTORIES = ("etc", "home", "root", "tmp")


@dataclasses.dataclass(frozen=True)
class Disk:
    """A boot disk's files: guest paths map to ``root``/path (a guest path never leaves ``root``)."""

    root: pathlib.Path

    def __post_init__(self) -> None:
        for top in BASE_DIRECTORIES:  # what a cloud image has before anything is written
            (self.root / top).mkdir(parents=True, exist_ok=True)

    def path(self, guest_path: str) -> pathlib.Path:
        clean = posixpath.normpath("/" + guest_path).lstrip("/")  # "/../x" -> "x": never above the root
        return self.root / clean if clean not in ("", ".") else self.root

    def home(self, user: str) -> str:
        """The user's home (made at the first login, as cloud-init makes the default user's)."""
        home = "/root" if user == "root" else f"/home/{user}"
        self.path(home).mkdir(parents=True, exist_ok=True)
        return home


@dataclasses.dataclass
class Result:
    stdout: str = ""
    stderr: str = ""
    status: int = 0

    def fail(self, message: str, status: int = 1) -> None:
        """One operand's error: its line on standard error, the command's status."""
        self.stderr += message + "\n"
        self.status = status


@dataclasses.dataclass
class Shell:
    """One session's shell: ``run`` executes a command line as ``user`` in its home."""

    disk: Disk
    user: str
    hostname: str
    cwd: str = ""

    def __post_init__(self) -> None:
        self.cwd = self.cwd or self.disk.home(self.user)

    def run(self, line: str) -> Result:
        out = Result()
        try:
            lists = _parse(line)
        except ValueError as exc:
            return Result(stderr=f"bash: -c: line 1: syntax error: {exc}\n", status=2)
        errexit = False
        status = 0
        for index, (joiner, words) in enumerate(lists):
            if joiner == "&&" and status != 0 or joiner == "||" and status == 0:
                continue  # a command an and-or list skips leaves the status as it was
            guarded = index + 1 < len(lists) and lists[index + 1][0] in ("&&", "||")
            if words and words[0] == "set":
                errexit = _set(words[1:], errexit)
                status = 0
                continue
            result = self._simple(words)
            out.stdout += result.stdout
            out.stderr += result.stderr
            status = result.status
            if errexit and status != 0 and not guarded:
                break  # set -e ignores a failure inside an and-or list, not of its last command
        out.status = status
        return out

    # -- one simple command ---------------------------------------------------------------------------

    def _simple(self, words: list[str]) -> Result:
        while words and "=" in words[0] and words[0].split("=", 1)[0].isidentifier():
            words = words[1:]  # NAME=value: the environment of this shell only
        words, target, append = _redirection(words)
        if not words:
            return Result()
        if target is not None:  # bash opens the file before the command runs
            problem = self._write(target, "", append)
            if problem:
                return Result(stderr=f"bash: line 1: {target}: {problem}\n", status=1)
        command = COMMANDS.get(words[0])
        if command is None:
            return Result(stderr=f"bash: line 1: {words[0]}: command not found\n", status=127)
        result = command(self, words[1:])
        if target is not None:
            self._write(target, result.stdout, True)
            result = Result(stderr=result.stderr, status=result.status)
        return result

    def _guest(self, name: str) -> str:
        return posixpath.normpath(posixpath.join(self.cwd, name))

    def _host(self, name: str) -> pathlib.Path:
        return self.disk.path(self._guest(name))

    def _write(self, name: str, text: str, append: bool) -> str | None:
        path = self._host(name)
        if not path.parent.is_dir():
            return "No such file or directory"
        if path.is_dir():
            return "Is a directory"
        with open(path, "a" if append else "w", encoding="utf-8") as f:
            f.write(text)
        return None


def _parse(line: str) -> list[tuple[str | None, list[str]]]:
    """[(what joins it to the one before: None, ";", "&&" or "||"), words] for each simple command."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|<>")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    lists: list[tuple[str | None, list[str]]] = []
    joiner: str | None = None
    words: list[str] = []
    for token in lexer:
        if token in (";", "&&", "||"):
            lists.append((joiner, words))
            joiner, words = token, []
        elif token in ("|", "&", "<") or set(token) <= set(";&|<>") and token not in (">", ">>"):
            raise ValueError(f"near unexpected token `{token}'")
        else:
            words.append(token)
    if words or not lists:
        lists.append((joiner, words))
    return lists


def _set(args: list[str], errexit: bool) -> bool:
    for arg in args:
        if arg.startswith(("-", "+")) and "e" in arg and not arg.startswith(("-o", "+o")):
            errexit = arg.startswith("-")
    return errexit


def _redirection(words: list[str]) -> tuple[list[str], str | None, bool]:
    kept: list[str] = []
    target: str | None = None
    append = False
    it = iter(words)
    for word in it:
        if word in (">", ">>"):
            target, append = next(it, ""), word == ">>"
        else:
            kept.append(word)
    return kept, target, append


# -- the commands ------------------------------------------------------------------------------------

def _true(shell: Shell, args: list[str]) -> Result:
    return Result()


def _false(shell: Shell, args: list[str]) -> Result:
    return Result(status=1)


def _echo(shell: Shell, args: list[str]) -> Result:
    newline = "\n"
    if args and args[0] == "-n":
        args, newline = args[1:], ""
    return Result(stdout=" ".join(args) + newline)


def _operands(args: list[str]) -> tuple[set[str], list[str]]:
    flags = {c for a in args if a.startswith("-") and a != "-" for c in a[1:]}
    return flags, [a for a in args if not a.startswith("-") or a == "-"]


def _touch(shell: Shell, args: list[str]) -> Result:
    _flags, names = _operands(args)
    if not names:
        return Result(stderr="touch: missing file operand\nTry 'touch --help' for more information.\n", status=1)
    out = Result()
    for name in names:
        path = shell._host(name)
        if not path.parent.is_dir():
            out.fail(f"touch: cannot touch '{name}': No such file or directory")
        else:
            path.touch()
    return out


def _cat(shell: Shell, args: list[str]) -> Result:
    _flags, names = _operands(args)
    out = Result()
    for name in names:
        path = shell._host(name)
        if path.is_dir():
            out.fail(f"cat: {name}: Is a directory")
        elif not path.exists():
            out.fail(f"cat: {name}: No such file or directory")
        else:
            out.stdout += path.read_text(encoding="utf-8", errors="replace")
    return out


def _rm(shell: Shell, args: list[str]) -> Result:
    flags, names = _operands(args)
    out = Result()
    for name in names:
        path = shell._host(name)
        if path == shell.disk.root:
            out.fail("rm: it is dangerous to operate recursively on '/'")
        elif path.is_dir() and not path.is_symlink():
            if "r" in flags or "R" in flags:
                shutil.rmtree(path)
            else:
                out.fail(f"rm: cannot remove '{name}': Is a directory")
        elif path.exists():
            path.unlink()
        elif "f" not in flags:
            out.fail(f"rm: cannot remove '{name}': No such file or directory")
    return out


def _mkdir(shell: Shell, args: list[str]) -> Result:
    flags, names = _operands(args)
    out = Result()
    for name in names:
        path = shell._host(name)
        if path.exists() and "p" not in flags:
            out.fail(f"mkdir: cannot create directory '{name}': File exists")
        elif not path.parent.is_dir() and "p" not in flags:
            out.fail(f"mkdir: cannot create directory '{name}': No such file or directory")
        else:
            path.mkdir(parents=True, exist_ok=True)
    return out


def _ls(shell: Shell, args: list[str]) -> Result:
    flags, names = _operands(args)
    out = Result()
    for name in names or ["."]:
        path = shell._host(name)
        if path.is_dir():
            entries = sorted(e.name for e in path.iterdir() if "a" in flags or not e.name.startswith("."))
            out.stdout += "".join(f"{e}\n" for e in entries)
        elif path.exists():
            out.stdout += f"{name}\n"
        else:
            out.fail(f"ls: cannot access '{name}': No such file or directory", 2)
    return out


def _pwd(shell: Shell, args: list[str]) -> Result:
    return Result(stdout=shell.cwd + "\n")


def _hostname(shell: Shell, args: list[str]) -> Result:
    return Result(stdout=shell.hostname + "\n")


def _whoami(shell: Shell, args: list[str]) -> Result:
    return Result(stdout=shell.user + "\n")


def _id(shell: Shell, args: list[str]) -> Result:
    if shell.user == "root":
        return Result(stdout="uid=0(root) gid=0(root) groups=0(root)\n")
    return Result(stdout=f"uid=1000({shell.user}) gid=1000({shell.user}) groups=1000({shell.user}),27(sudo)\n")


def _uname(shell: Shell, args: list[str]) -> Result:
    flags, _names = _operands(args)
    if "a" in flags:
        return Result(stdout=f"{UNAME} {shell.hostname} {KERNEL} #45-Ubuntu SMP PREEMPT_DYNAMIC x86_64 GNU/Linux\n")
    if "r" in flags:
        return Result(stdout=KERNEL + "\n")
    return Result(stdout=UNAME + "\n")


def _sudo(shell: Shell, args: list[str]) -> Result:
    """The default user may do anything without a password (cloud-init's sudoers entry)."""
    while args and args[0].startswith("-"):
        args = args[1:]
    if not args:
        return Result(stderr="usage: sudo -h | -K | -k | -V\n", status=1)
    root = Shell(shell.disk, "root", shell.hostname, cwd=shell.cwd)
    if args[0] in ("sh", "bash") and len(args) >= 3 and args[1] == "-c":
        return root.run(args[2])
    return root._simple(args)


COMMANDS: dict[str, Callable[[Shell, list[str]], Result]] = {
    "true": _true, "false": _false, "echo": _echo, "touch": _touch, "cat": _cat, "rm": _rm, "mkdir": _mkdir,
    "ls": _ls, "pwd": _pwd, "hostname": _hostname, "whoami": _whoami, "id": _id, "uname": _uname, "sudo": _sudo,
}


def remove_disk(root: pathlib.Path) -> None:
    """A disk that is gone takes its files with it."""
    if root.is_dir():
        shutil.rmtree(root, ignore_errors=True)
    elif root.exists():
        os.unlink(root)
