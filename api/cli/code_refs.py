"""``flagsight code-refs``: where a source tree names an environment's flag keys (contract §14).

The command itself (``api.cli.admin_commands``, with the other admin commands) resolves the
environment, reads its flag keys from the admin API and uploads; this module holds what it does
with them: the scan of a tree, its progress line, its output, and the upload's body.

What is scanned. Every regular file under PATH but those git would ignore: the ``.gitignore``
of PATH and of every directory below it, each pattern relative to its own file's directory, a
deeper file's last matching pattern deciding over a shallower one's, ``!`` re-including, and an
ignored directory never entered (so nothing under it can be re-included), as git does; when
PATH lies inside a git work tree, the ``.gitignore`` files of the directories from its top down
to PATH count too. The patterns are read by ``pathspec`` (its ``GitIgnoreSpec`` follows git's
matching), not by hand; ``.git/info/exclude`` and a global excludes file are not read. Always
skipped: ``.git``, symbolic links (a link is not code; a linked directory is not entered),
binary files (a NUL byte in their first 8 KiB) and files larger than ``MAX_FILE_BYTES`` (2 MiB:
generated bundles and data, not code someone edits). A file is read as UTF-8, undecodable
bytes replaced; its lines are counted by ``\\n``, from 1.

What is a reference: a flag key as a whole token. A key is made of ``[A-Za-z0-9._-]``
(``flagsight_core.contract.KEY_CHARACTERS``), so a match counts only when the character before
it is not one of those, and neither is the one after it, except that a ``.`` which is itself
followed by none of them (or by the end of the file) still ends the token: ``my-flag`` is found
in ``"my-flag"``, ``key=my-flag`` and ``Remove my-flag.`` but not in ``my-flag-extra``,
``xmy-flag``, ``my-flag_2``, ``my-flag.v2`` or ``beta.my-flag`` (each of those could be another
key). All keys are matched in one pass over each file by one compiled expression (the escaped
keys, longest first, so that of ``a`` and ``a.`` the longer wins where both fit). A key named
several times on one line is one reference. The references are sorted by path, line, then key;
paths are relative to PATH, with ``/``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import urlsplit, urlunsplit

from flagsight_core.contract import KEY_CHARACTERS
from flagsight_core.words import counted
from pathspec import GitIgnoreSpec

MAX_FILE_BYTES = 2 * 1024 * 1024
"""Files larger than this are skipped (minified bundles, fixtures, data)."""
BINARY_SNIFF_BYTES = 8192
"""A NUL byte within a file's first this many bytes makes it binary."""
PROGRESS_AFTER_S = 2.0
PROGRESS_AFTER_FILES = 2000
"""A scan is long, and shows its progress on stderr, past either of these."""
PROGRESS_EVERY_S_TTY = 0.1
PROGRESS_EVERY_S_PIPE = 5.0
"""How often a long scan's progress line is rewritten on a terminal, or added to a log."""
GIT_TIMEOUT_S = 10.0


@dataclass(frozen=True, order=True)
class Reference:
    """One line of one file naming one flag key (the order: path, line, key)."""

    path: str
    line: int
    flag_key: str

    def as_json(self) -> dict[str, Any]:
        return {"flagKey": self.flag_key, "path": self.path, "line": self.line}


# --- matching -----------------------------------------------------------------------------


def key_matcher(keys: Iterable[str]) -> re.Pattern[str] | None:
    """One expression finding every key of ``keys`` as a whole token (the module's rule), or
    None when there is no key to find."""
    unique = sorted(set(keys), key=lambda key: (-len(key), key))
    if not unique:
        return None
    alternatives = "|".join(re.escape(key) for key in unique)
    key_char = f"[{KEY_CHARACTERS}]"
    but_dot = f"[{KEY_CHARACTERS.replace('.', '')}]"
    return re.compile(f"(?<!{key_char})(?:{alternatives})(?!{but_dot}|\\.{key_char})")


def references_in(text: str, path: str, matcher: re.Pattern[str]) -> list[Reference]:
    """The references in one file's ``text``, in order, one per key and line."""
    found: list[Reference] = []
    seen: set[tuple[int, str]] = set()
    line, counted_to = 1, 0
    for match in matcher.finditer(text):
        start = match.start()
        line += text.count("\n", counted_to, start)
        counted_to = start
        if (line, match[0]) not in seen:
            seen.add((line, match[0]))
            found.append(Reference(path, line, match[0]))
    return found


# --- the walk -----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Ignore:
    """One ``.gitignore``: a path relative to PATH is checked, as git does, relative to the
    file's directory: ``within`` (that directory relative to PATH, or "" for PATH and above)
    taken off its front and ``above`` (PATH relative to that directory, for a file above PATH)
    put on it."""

    spec: GitIgnoreSpec
    within: str = ""
    above: str = ""

    def decides(self, relative: str) -> bool | None:
        """True ignored, False re-included (``!``), None when no pattern matches."""
        return self.spec.check_file(self.above + relative[len(self.within) :]).include


def _read_ignore(directory: str | Path) -> GitIgnoreSpec | None:
    path = os.path.join(directory, ".gitignore")
    try:
        if not os.path.isfile(path) or os.path.islink(path):
            return None
        with open(path, encoding="utf-8", errors="replace") as patterns:
            spec = GitIgnoreSpec.from_lines(patterns.read().splitlines())
    except OSError:
        return None
    return spec if len(spec) else None


def _ignored(relative: str, ignores: Sequence[_Ignore]) -> bool:
    """The deepest ``.gitignore`` with a pattern matching ``relative`` decides."""
    for ignore in reversed(ignores):
        decision = ignore.decides(relative)
        if decision is not None:
            return decision
    return False


def _ignores_above(root: Path) -> list[_Ignore]:
    """The ``.gitignore`` files from the top of the git work tree holding ``root`` (the nearest
    directory above it with a ``.git``) down to ``root``'s parent; none outside a work tree."""
    resolved = root.resolve()
    if (resolved / ".git").exists():
        return []
    for top in resolved.parents:
        if (top / ".git").exists():
            break
    else:
        return []
    ignores: list[_Ignore] = []
    directory = top
    for part in resolved.relative_to(top).parts:
        spec = _read_ignore(directory)
        if spec is not None:
            above = resolved.relative_to(directory).as_posix() + "/"
            ignores.append(_Ignore(spec, above=above))
        directory = directory / part
    return ignores


def _shown(relative: str) -> str:
    """A path as text that can be printed and sent as JSON (a name that is not UTF-8 gets
    replacement characters)."""
    return relative.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def scan(
    root: Path,
    keys: Iterable[str],
    *,
    progress: Progress | None = None,
    max_file_bytes: int = MAX_FILE_BYTES,
) -> list[Reference]:
    """The references to ``keys`` in the tree at ``root`` (the module says what is scanned and
    what matches), sorted by path, line, then key."""
    matcher = key_matcher(keys)
    if matcher is None:
        return []
    if progress is not None:
        progress.start()
    references: list[Reference] = []
    files = 0
    pending: list[tuple[str, str, tuple[_Ignore, ...]]] = [
        (str(root), "", tuple(_ignores_above(root)))
    ]
    while pending:
        directory, prefix, ignores = pending.pop()
        spec = _read_ignore(directory)
        if spec is not None:
            ignores = (*ignores, _Ignore(spec, within=prefix))
        try:
            with os.scandir(directory) as listing:
                entries = list(listing)
        except OSError:
            continue  # unreadable, or gone since it was listed
        for entry in entries:
            if entry.name == ".git":
                continue
            relative = prefix + entry.name
            try:
                if entry.is_symlink():
                    continue
                if entry.is_dir():
                    if not _ignored(relative + "/", ignores):
                        pending.append((entry.path, relative + "/", ignores))
                    continue
                if not entry.is_file() or _ignored(relative, ignores):
                    continue
                if entry.stat().st_size > max_file_bytes:
                    continue
                with open(entry.path, "rb") as source:
                    data = source.read(max_file_bytes + 1)
            except OSError:
                continue
            files += 1
            if len(data) <= max_file_bytes and data.find(b"\0", 0, BINARY_SNIFF_BYTES) < 0:
                text = data.decode("utf-8", errors="replace")
                references.extend(references_in(text, _shown(relative), matcher))
            if progress is not None:
                progress.update(files, len(references))
    if progress is not None:
        progress.finish(files, len(references))
    references.sort()
    return references


class Progress:
    """A long scan's progress on ``stream`` (stderr): nothing while the scan is short (up to
    ``after_s`` seconds and ``after_files`` files), then a line, rewritten in place on a
    terminal and at most every ``every_s`` seconds otherwise, and a last one at the end."""

    def __init__(
        self,
        stream: TextIO | None = None,
        *,
        after_s: float = PROGRESS_AFTER_S,
        after_files: int = PROGRESS_AFTER_FILES,
        every_s: float | None = None,
        tty: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.stream = stream if stream is not None else sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self.after_s, self.after_files = after_s, after_files
        default_every_s = PROGRESS_EVERY_S_TTY if self.tty else PROGRESS_EVERY_S_PIPE
        self.every_s = default_every_s if every_s is None else every_s
        self.clock = clock
        self.started = clock()
        self.shown_at: float | None = None

    def start(self) -> None:
        self.started, self.shown_at = self.clock(), None

    def update(self, files: int, references: int) -> None:
        now = self.clock()
        if self.shown_at is None:
            if files <= self.after_files and now - self.started <= self.after_s:
                return
        elif now - self.shown_at < self.every_s:
            return
        self.shown_at = now
        self._show(f"{_scanned(files, references)} so far")

    def finish(self, files: int, references: int) -> None:
        """The last count, only when progress was shown (a short scan stays quiet)."""
        if self.shown_at is None:
            return
        self._show(f"{_scanned(files, references)} in {self.clock() - self.started:.1f} s")
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()

    def _show(self, text: str) -> None:
        line = f"flagsight: code-refs: {text}"
        self.stream.write(f"\r{line}\x1b[K" if self.tty else line + "\n")
        self.stream.flush()


def _scanned(files: int, references: int) -> str:
    return f"{counted(files, 'file')} scanned, {counted(references, 'reference')}"


# --- output -------------------------------------------------------------------------------


def reference_lines(references: Iterable[Reference]) -> str:
    """``path:line key``, one reference a line (nothing for none)."""
    return "".join(f"{ref.path}:{ref.line} {ref.flag_key}\n" for ref in references)


def references_json(references: Iterable[Reference]) -> dict[str, Any]:
    return {"references": [ref.as_json() for ref in references]}


def upload_body(
    references: Sequence[Reference], repository: str, revision: str | None
) -> dict[str, Any]:
    """``PUT /admin/v1/environments/{envId}/code-refs``'s body (contract §14)."""
    return {"repository": repository, "revision": revision, **references_json(references)}


def upload_summary(references: Sequence[Reference], repository: str, revision: str | None) -> str:
    flags = len({ref.flag_key for ref in references})
    at = f"at {revision}" if revision else "(no git revision)"
    return (
        f"Uploaded {counted(len(references), 'reference')} to {counted(flags, 'flag')}"
        f" for {repository} {at}."
    )


# --- where the references come from: git ---------------------------------------------------


def _git(root: Path, *arguments: str) -> str | None:
    """``git -C root arguments``'s output, or None when git fails or is not installed."""
    try:
        done = subprocess.run(
            ["git", "-C", str(root), *arguments],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_S,
            check=False,
            env={**os.environ, "GIT_TERMINAL_PROMPT": "0"},
        )
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    output = done.stdout.strip()
    return output if done.returncode == 0 and output else None


def in_git_work_tree(root: Path) -> bool:
    return _git(root, "rev-parse", "--is-inside-work-tree") == "true"


def repository_name(root: Path, given: str | None = None) -> str:
    """``given``, else the git remote ``origin``'s URL (without any user or password in it),
    else ``root``'s directory name."""
    if given:
        return given
    if in_git_work_tree(root):
        origin = _git(root, "remote", "get-url", "origin")
        if origin:
            return _without_credentials(origin)
    resolved = root.resolve()
    return resolved.name or str(resolved)


def revision(root: Path) -> str | None:
    """The commit checked out (``git rev-parse HEAD``), or None outside a git work tree or
    before its first commit."""
    if not in_git_work_tree(root):
        return None
    return _git(root, "rev-parse", "--verify", "--quiet", "HEAD")


def _without_credentials(url: str) -> str:
    """``https://user:token@host/repo.git`` as ``https://host/repo.git``: a remote's URL may
    carry a token, which must not leave this machine. ``git@host:repo.git`` is kept as is."""
    if "://" not in url:
        return url
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))
