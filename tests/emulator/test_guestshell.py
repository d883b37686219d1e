"""The emulated guest's login shell over its disk's files: bash's lists and ``set -e``, coreutils' messages, and
guest paths that never leave the disk."""

from __future__ import annotations

import pytest

from openkeel_compute.emulator.guestshell import Disk, Shell


@pytest.fixture
def shell(tmp_path):
    return Shell(Disk(tmp_path / "disk"), "ubuntu", "vm-1")


def run(shell, line):
    result = shell.run(line)
    return result.stdout, result.stderr, result.status


def test_a_fresh_disk_has_the_images_folders_and_the_users_home(shell, tmp_path):
    assert sorted(p.name for p in (tmp_path / "disk").iterdir()) == ["etc", "home", "root", "tmp"]
    assert run(shell, "pwd; ls -a") == ("/home/ubuntu\n", "", 0)


def test_lists_and_errexit_as_bash(shell):
    assert run(shell, "false; echo after") == ("after\n", "", 0)  # without -e a list goes on
    assert run(shell, "set -e; false; echo after") == ("", "", 1)
    assert run(shell, "set -eu -o pipefail; PATH=$PATH:/sbin; true") == ("", "", 0)
    assert run(shell, "false && echo no || echo yes") == ("yes\n", "", 0)
    assert run(shell, "true && echo a; echo b") == ("a\nb\n", "", 0)
    assert run(shell, "set -e; false || echo rescued") == ("rescued\n", "", 0)
    assert run(shell, "set -e; false && true; echo on") == ("on\n", "", 0)  # bash's exception for and-or lists
    assert run(shell, "set -e; true && false; echo off") == ("", "", 1)
    assert run(shell, "echo 'a;b' \"c && d\"") == ("a;b c && d\n", "", 0)
    assert run(shell, "nosuch --flag") == ("", "bash: line 1: nosuch: command not found\n", 127)
    assert run(shell, "echo a | cat")[2] == 2  # no pipes: a syntax error, never a wrong answer


def test_files_are_written_read_and_removed_with_coreutils_words(shell):
    assert run(shell, "touch a b && echo one > c && echo two >> c && cat c && ls") == ("one\ntwo\na\nb\nc\n", "", 0)
    assert run(shell, "cat nope") == ("", "cat: nope: No such file or directory\n", 1)
    assert run(shell, "touch d/e") == ("", "touch: cannot touch 'd/e': No such file or directory\n", 1)
    assert run(shell, "mkdir -p d/e && touch d/e/f && cat d") == ("", "cat: d: Is a directory\n", 1)
    assert run(shell, "rm d") == ("", "rm: cannot remove 'd': Is a directory\n", 1)
    assert run(shell, "rm -r d && rm a && rm -f a && ls") == ("b\nc\n", "", 0)
    assert run(shell, "rm a") == ("", "rm: cannot remove 'a': No such file or directory\n", 1)
    assert run(shell, "echo x > /nowhere/f")[1:] == ("bash: line 1: /nowhere/f: No such file or directory\n", 1)


def test_guest_paths_never_leave_the_disk(shell, tmp_path):
    (tmp_path / "secret").write_text("host\n")
    assert run(shell, "cat ../../../../secret /../secret")[2] == 1
    assert run(shell, "rm -rf /") == ("", "rm: it is dangerous to operate recursively on '/'\n", 1)
    assert run(shell, "touch ../../../escape") == ("", "", 0)
    assert (tmp_path / "disk" / "escape").exists() and not (tmp_path / "escape").exists()


def test_identity_and_sudo(shell):
    assert run(shell, "whoami; id; hostname; uname -r") == (
        "ubuntu\nuid=1000(ubuntu) gid=1000(ubuntu) groups=1000(ubuntu),27(sudo)\nvm-1\n6.8.0-45-generic\n", "", 0)
    assert run(shell, "sudo whoami; sudo sh -c 'touch /root/r; ls /root'") == ("root\nr\n", "", 0)
    assert run(shell, "ls /root") == ("r\n", "", 0)
