"""``flagsight code-refs``: the scan (whole tokens, ``.gitignore``, binary and large files), its
output, its progress line, and ``--upload``'s request.

The command runs in-process (``api.cli.main.main``) against a small fake admin API on loopback
(``http.server`` in a thread), which keeps every request so a test can assert the exact body
sent; the last tests run it against the real service, the upload showing on the flag."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from api.cli.code_refs import MAX_FILE_BYTES, Progress, Reference, key_matcher, scan
from api.cli.main import build_parser, main
from tests.conftest import ADMIN_TOKEN
from tests.support.admin import Admin, Tenant
from tests.support.needs import needs
from tests.support.server import GunicornServer

ORG = "org_00000000000000aa"
ENV = "env_00000000000000bb"
KEYS = ["my-flag", "beta.launch", "dark_mode"]


# --- a fake admin API -----------------------------------------------------------------------


@dataclass
class FakeAdminApi:
    """The few admin routes ``code-refs`` calls, for one organization with one environment."""

    flags: list[str] = field(default_factory=lambda: list(KEYS))
    requests: list[tuple[str, str, Any]] = field(default_factory=list)
    url: str = ""

    def answer(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        self.requests.append((method, path, body))
        routes: dict[tuple[str, str], Any] = {
            ("GET", "/admin/v1/organizations"): {"items": [{"id": ORG, "name": "Acme"}]},
            ("GET", f"/admin/v1/organizations/{ORG}/environments"): {
                "items": [{"id": ENV, "key": "production"}]
            },
            ("GET", f"/admin/v1/environments/{ENV}"): {"id": ENV, "key": "production"},
            ("GET", f"/admin/v1/environments/{ENV}/flags"): {
                "items": [
                    {"key": key, "enabled": True, "archived": False, "rules": []}
                    for key in sorted(self.flags)
                ]
            },
            ("PUT", f"/admin/v1/environments/{ENV}/code-refs"): None,
        }
        if (method, path) in routes:
            answer = routes[(method, path)]
            return (204, None) if answer is None else (200, answer)
        message = f"No route {path}" if "/environments/" not in path else "No such environment"
        return 404, {"status": 404, "error": "Not Found", "message": message}

    def sent(self, method: str = "PUT") -> list[tuple[str, Any]]:
        return [(path, body) for verb, path, body in self.requests if verb == method]


@pytest.fixture
def api() -> Iterator[FakeAdminApi]:
    fake = FakeAdminApi()

    class Handler(BaseHTTPRequestHandler):
        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length)) if length else None
            if self.headers.get("Authorization") != f"Bearer {ADMIN_TOKEN}":
                status, answer = 401, {"status": 401, "error": "Unauthorized", "message": "no"}
            else:
                status, answer = fake.answer(self.command, self.path, body)
            data = b"" if answer is None else json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_PUT = _serve  # noqa: N815 - http.server's names

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    yield fake
    server.shutdown()
    server.server_close()
    thread.join()


@dataclass
class Ran:
    status: int
    out: str
    err: str


Cli = Callable[..., Ran]


@pytest.fixture
def cli(
    api: FakeAdminApi, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Cli:
    """``flagsight code-refs ARGS --url <the fake>``, in a clean environment (no FLAGSIGHT_*
    variable of the developer's shell leaks in); stderr is captured, so not a terminal."""
    for name in list(os.environ):
        if name.startswith("FLAGSIGHT_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("FLAGSIGHT_ADMIN_TOKEN", ADMIN_TOKEN)

    def run(*args: str, url: str | None = None) -> Ran:
        capsys.readouterr()
        status = main(["code-refs", *args, "--url", url or api.url])
        captured = capsys.readouterr()
        return Ran(status, captured.out, captured.err)

    return run


def ok(ran: Ran) -> str:
    assert (ran.status, ran.err) == (0, ""), ran
    return ran.out


def write(root: Path, files: dict[str, str | bytes]) -> Path:
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    return root


def git(root: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


# --- what matches ---------------------------------------------------------------------------


def test_keys_are_found_as_whole_tokens_only(tmp_path: Path, cli: Cli) -> None:
    write(
        tmp_path,
        {
            "app.py": "\n".join(
                [
                    'if client.enabled("my-flag"):',  # 1
                    "my-flag-extra xmy-flag my-flag_2 my-flag.v2 beta.my-flag MY-FLAG",
                    "# Remove my-flag. Then (beta.launch), my-flag again on this line",  # 3
                    "beta.launcher beta.launch.x betaxlaunch dark_mode_2 dark_modes",
                    "",
                    "flags = {'dark_mode': 1}  # dark_mode, at the end: my-flag.",  # 6
                    "last line without a newline: key=my-flag",  # 7
                ]
            )
        },
    )
    assert ok(cli(str(tmp_path))) == (
        "app.py:1 my-flag\n"
        "app.py:3 beta.launch\n"
        "app.py:3 my-flag\n"
        "app.py:6 dark_mode\n"
        "app.py:6 my-flag\n"
        "app.py:7 my-flag\n"
    )


def test_the_longest_key_wins_where_two_fit() -> None:
    matcher = key_matcher(["a", "a.", "a.b"])
    assert matcher is not None
    assert [m[0] for m in matcher.finditer("a a. a.b a.bc a.b. (a)")] == [
        "a", "a.", "a.b", "a.b", "a",
    ]  # fmt: skip


def test_output_is_path_line_key_relative_to_path_sorted(
    tmp_path: Path, cli: Cli, api: FakeAdminApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    tree = write(
        tmp_path / "checkout",
        {
            "src/zeta.py": "x = 1\nif on('dark_mode') and on('my-flag'):\n",
            "src/sub/deep.ts": "\n\n\n\n\n\n\n\n\nconst f = 'beta.launch'\n",
            "README.md": "Flags: my-flag\n\nand my-flag\n",
            "src/alpha.py": "my-flag\n" * 2,
            "other.txt": "nothing here\n",
        },
    )
    expected = [
        "README.md:1 my-flag",
        "README.md:3 my-flag",
        "src/alpha.py:1 my-flag",
        "src/alpha.py:2 my-flag",
        "src/sub/deep.ts:10 beta.launch",
        "src/zeta.py:2 dark_mode",
        "src/zeta.py:2 my-flag",
    ]
    assert ok(cli(str(tree))).splitlines() == expected
    monkeypatch.chdir(tree)
    assert ok(cli()).splitlines() == expected  # PATH defaults to .
    assert ok(cli("src", "--env", "production")).splitlines()[0] == "alpha.py:1 my-flag"

    as_json = json.loads(ok(cli(str(tree), "--json")))
    assert as_json["references"][:2] == [
        {"flagKey": "my-flag", "path": "README.md", "line": 1},
        {"flagKey": "my-flag", "path": "README.md", "line": 3},
    ]
    assert len(as_json["references"]) == len(expected)
    assert api.sent() == []  # nothing leaves without --upload


def test_gitignore_root_nested_and_negation(tmp_path: Path, cli: Cli) -> None:
    found = "uses my-flag\n"
    write(
        tmp_path,
        {
            ".gitignore": "# comment\n*.log\n!keep.log\nbuild/\n/top-only.txt\nvendor/\n"
            "!vendor/kept.py\n",
            "app.log": found,
            "keep.log": found,
            "build/out.py": found,
            "top-only.txt": found,
            "vendor/kept.py": found,  # its directory is ignored: nothing in it comes back
            "sub/.gitignore": "!app.log\n/anchored.txt\ngenerated/\n",
            "sub/app.log": found,  # the deeper file re-includes it
            "sub/build/out.py": found,  # build/ is ignored at any depth
            "sub/top-only.txt": found,  # /top-only.txt is the root's only
            "sub/anchored.txt": found,
            "sub/deeper/anchored.txt": found,
            "sub/generated/made.py": found,
            "other/generated/made.py": found,  # sub's rules stay in sub
            "other/other.log": found,
            ".git/config": found,  # never scanned, ignored or not
            ".git/sub/HEAD": found,
        },
    )
    assert ok(cli(str(tmp_path))).splitlines() == [
        "keep.log:1 my-flag",
        "other/generated/made.py:1 my-flag",
        "sub/app.log:1 my-flag",
        "sub/deeper/anchored.txt:1 my-flag",
        "sub/top-only.txt:1 my-flag",
    ]


def test_gitignore_files_above_path_count_within_the_work_tree(tmp_path: Path, cli: Cli) -> None:
    repository = write(
        tmp_path / "repo",
        {
            ".gitignore": "*.gen\nsrc/skipped/\n",
            "src/.gitignore": "local.py\n",
            "src/app/main.py": "my-flag\n",
            "src/app/made.gen": "my-flag\n",
            "src/app/local.py": "my-flag\n",
            "src/skipped/x.py": "my-flag\n",
        },
    )
    (repository / ".git").mkdir()
    assert ok(cli(str(repository / "src"))).splitlines() == ["app/main.py:1 my-flag"]
    assert ok(cli(str(repository / "src" / "app"))).splitlines() == ["main.py:1 my-flag"]


def test_binary_large_and_linked_files_are_skipped(tmp_path: Path, cli: Cli) -> None:
    filler = b"x" * (MAX_FILE_BYTES - len(b"my-flag\n"))
    write(
        tmp_path,
        {
            "binary.dat": b"\x89PNG\0\0 my-flag\n",
            "late-nul.txt": b"my-flag\n" + b" " * 9000 + b"\0",  # no NUL in the first 8 KiB
            "latin1.txt": b"caf\xe9 my-flag\n",  # not UTF-8: still read
            "at-the-cap.txt": b"my-flag\n" + filler,
            "past-the-cap.txt": b"my-flag\n" + filler + b"x",
        },
    )
    (tmp_path / "linked.txt").symlink_to(tmp_path / "latin1.txt")
    (tmp_path / "linked-dir").symlink_to(tmp_path, target_is_directory=True)
    assert ok(cli(str(tmp_path))).splitlines() == [
        "at-the-cap.txt:1 my-flag",
        "late-nul.txt:1 my-flag",
        "latin1.txt:1 my-flag",
    ]


def test_an_environment_without_flags_finds_nothing(tmp_path: Path, cli: Cli, api: FakeAdminApi):
    write(tmp_path, {"a.py": "my-flag\n"})
    api.flags = []
    assert ok(cli(str(tmp_path))) == ""
    assert json.loads(ok(cli(str(tmp_path), "--json"))) == {"references": []}


# --- upload ---------------------------------------------------------------------------------


def test_upload_sends_the_references_outside_git(
    tmp_path: Path, cli: Cli, api: FakeAdminApi
) -> None:
    tree = write(
        tmp_path / "shop",
        {"a.py": "my-flag\ndark_mode\n", "b/c.py": "x\n\nmy-flag and dark_mode\n"},
    )
    said = ok(cli(str(tree), "--upload"))
    assert said == (
        "a.py:1 my-flag\n"
        "a.py:2 dark_mode\n"
        "b/c.py:3 dark_mode\n"
        "b/c.py:3 my-flag\n"
        "Uploaded 4 references to 2 flags for shop (no git revision).\n"
    )
    assert api.sent() == [
        (
            f"/admin/v1/environments/{ENV}/code-refs",
            {
                "repository": "shop",
                "revision": None,
                "references": [
                    {"flagKey": "my-flag", "path": "a.py", "line": 1},
                    {"flagKey": "dark_mode", "path": "a.py", "line": 2},
                    {"flagKey": "dark_mode", "path": "b/c.py", "line": 3},
                    {"flagKey": "my-flag", "path": "b/c.py", "line": 3},
                ],
            },
        )
    ]

    named = json.loads(ok(cli(str(tree), "--upload", "--repository", "acme/shop", "--json")))
    body = api.sent()[-1][1]
    assert body["repository"] == "acme/shop"
    assert named == {**body, "answer": None}  # the PUT answered 204

    write(tree, {"a.py": "nothing\n", "b/c.py": "nothing\n"})
    emptied = ok(cli(str(tree), "--upload"))
    assert emptied == "Uploaded 0 references to 0 flags for shop (no git revision).\n"
    assert api.sent()[-1][1]["references"] == []  # so the service forgets the old ones


@needs(shutil.which("git") is not None, "git")
def test_upload_names_the_git_remote_and_revision(
    tmp_path: Path, cli: Cli, api: FakeAdminApi
) -> None:
    tree = write(tmp_path / "work", {"src/a.py": "my-flag\n", ".gitignore": "*.tmp\n"})
    git(tree, "init", "-q")
    revisionless = ok(cli(str(tree), "--upload"))  # a work tree before its first commit
    assert revisionless.endswith("for work (no git revision).\n")
    git(tree, "add", ".")
    git(tree, "commit", "-q", "-m", "first")
    head = git(tree, "rev-parse", "HEAD")
    git(
        tree, "remote", "add", "origin", "https://ci-bot:s3cret-token@git.example.com/acme/shop.git"
    )

    said = ok(cli(str(tree / "src"), "--upload"))
    assert said == (
        "a.py:1 my-flag\n"
        f"Uploaded 1 reference to 1 flag for https://git.example.com/acme/shop.git at {head}.\n"
    )
    assert api.sent()[-1][1] == {
        "repository": "https://git.example.com/acme/shop.git",  # never the token
        "revision": head,
        "references": [{"flagKey": "my-flag", "path": "a.py", "line": 1}],
    }
    git(tree, "remote", "set-url", "origin", "git@git.example.com:acme/shop.git")
    ok(cli(str(tree), "--upload"))
    assert api.sent()[-1][1]["repository"] == "git@git.example.com:acme/shop.git"


# --- refusals -------------------------------------------------------------------------------


def test_an_unknown_environment_is_an_error(tmp_path: Path, cli: Cli, api: FakeAdminApi) -> None:
    write(tmp_path, {"a.py": "my-flag\n"})
    by_key = cli(str(tmp_path), "--env", "staging", "--upload")
    assert (by_key.status, by_key.out) == (1, "")
    assert by_key.err == (
        f"flagsight: organization {ORG} has no environment 'staging' (its environments:"
        " production)\n"
    )
    by_id = cli(str(tmp_path), "--env", "env_0123456789abcdef", "--upload")
    assert (by_id.status, by_id.out) == (1, "")
    assert by_id.err == "flagsight: 404 Not Found: No such environment\n"
    assert api.sent() == []  # nothing uploaded


def test_a_path_that_is_not_a_directory_is_refused_before_any_call(
    tmp_path: Path, cli: Cli, api: FakeAdminApi
) -> None:
    refused = cli(str(tmp_path / "missing"))
    assert (refused.status, refused.out) == (2, "")
    assert refused.err == f"flagsight: {str(tmp_path / 'missing')!r} is not a directory\n"
    assert api.requests == []


def test_the_command_is_listed() -> None:
    parser = build_parser()
    assert "\n    code-refs " in parser.format_help()
    args = parser.parse_args(["code-refs"])
    assert (args.path, args.upload, args.repository, args.env, args.org, args.json) == (
        ".", False, None, None, None, False,
    )  # fmt: skip
    args = parser.parse_args(["code-refs", "src", "--upload", "--repository", "r", "--env", "e"])
    assert (args.path, args.upload, args.repository, args.env) == ("src", True, "r", "e")


# --- a large tree, and progress -------------------------------------------------------------


def test_a_large_tree_is_scanned_with_progress_on_stderr(tmp_path: Path, cli: Cli) -> None:
    """20,000 small files: past the 2,000 files of a long scan, so stderr (not a terminal
    here) gets the progress lines, and stdout only the references."""
    tree = tmp_path / "big"
    for d in range(200):
        directory = tree / f"pkg{d:03d}"
        directory.mkdir(parents=True)
        for f in range(100):
            text = f"import os\nvalue = {f}\n"
            if f == 7:
                text += "if enabled('my-flag'): pass\n"
            (directory / f"mod{f:03d}.py").write_text(text, encoding="utf-8")
    ran = cli(str(tree))
    assert ran.status == 0
    lines = ran.out.splitlines()
    assert len(lines) == 200
    assert lines[0] == "pkg000/mod007.py:3 my-flag"
    progress = ran.err.splitlines()
    assert progress, "a long scan shows its progress"
    assert all(line.startswith("flagsight: code-refs: ") for line in progress)
    assert "\r" not in ran.err  # not a terminal: whole lines, never rewritten in place
    assert progress[-1].startswith("flagsight: code-refs: 20,000 files scanned, 200 references in")


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_progress_is_quiet_on_a_short_scan_then_paced() -> None:
    clock, stream = Clock(), io.StringIO()
    progress = Progress(stream, after_s=2, after_files=2000, tty=False, clock=clock)
    progress.start()
    clock.now += 1.5
    progress.update(1999, 3)
    progress.finish(1999, 3)
    assert stream.getvalue() == ""  # short: not a word

    progress.start()
    progress.update(2001, 4)  # past the files
    clock.now += 1
    progress.update(2500, 5)  # within the pace of a log (5 s)
    clock.now += 5
    progress.update(3000, 6)
    progress.finish(3001, 6)
    assert stream.getvalue().splitlines() == [
        "flagsight: code-refs: 2,001 files scanned, 4 references so far",
        "flagsight: code-refs: 3,000 files scanned, 6 references so far",
        "flagsight: code-refs: 3,001 files scanned, 6 references in 6.0 s",
    ]

    progress = Progress(stream := io.StringIO(), after_s=2, tty=False, clock=clock)
    clock.now += 2.5
    progress.update(1, 1)  # past the time
    assert stream.getvalue() == "flagsight: code-refs: 1 file scanned, 1 reference so far\n"


def test_progress_on_a_terminal_is_rewritten_in_place() -> None:
    clock, stream = Clock(), io.StringIO()
    progress = Progress(stream, after_files=0, tty=True, clock=clock)
    progress.update(1, 0)
    progress.update(2, 0)  # within 0.1 s
    clock.now += 0.2
    progress.update(3, 1)
    progress.finish(3, 1)
    assert stream.getvalue() == (
        "\rflagsight: code-refs: 1 file scanned, 0 references so far\x1b[K"
        "\rflagsight: code-refs: 3 files scanned, 1 reference so far\x1b[K"
        "\rflagsight: code-refs: 3 files scanned, 1 reference in 0.2 s\x1b[K\n"
    )


def test_scan_takes_its_progress_thresholds(tmp_path: Path) -> None:
    write(tmp_path, {f"f{n}.py": "my-flag\n" for n in range(3)})
    stream = io.StringIO()
    found = scan(tmp_path, ["my-flag"], progress=Progress(stream, after_files=1, tty=False))
    assert found == [Reference(f"f{n}.py", 1, "my-flag") for n in range(3)]
    assert stream.getvalue().startswith("flagsight: code-refs: 2 files scanned, ")
    assert (
        stream.getvalue()
        .splitlines()[-1]
        .startswith("flagsight: code-refs: 3 files scanned, 3 references in ")
    )


# --- against the real service ---------------------------------------------------------------


def test_against_the_service(
    tmp_path: Path, cli: Cli, module_server: GunicornServer, module_server_admin: Admin
) -> None:
    tenant: Tenant = module_server_admin.tenant()
    module_server_admin.flag(tenant.environment_id, "new-checkout", [{"type": "STATIC"}])
    module_server_admin.flag(tenant.environment_id, "dark-mode", [{"type": "STATIC"}])
    write(tmp_path, {"app.py": "on('new-checkout')\non('new-checkout-v2')\non('dark-mode')\n"})
    where = ["--org", tenant.organization_id]
    assert ok(cli(str(tmp_path), *where, url=module_server.url)) == (
        "app.py:1 new-checkout\napp.py:3 dark-mode\n"
    )
    by_id = cli(str(tmp_path), "--env", tenant.environment_id, url=module_server.url)
    assert ok(by_id) == "app.py:1 new-checkout\napp.py:3 dark-mode\n"
    missing = cli(str(tmp_path), *where, "--env", "staging", url=module_server.url)
    assert (missing.status, missing.out) == (1, "")
    assert missing.err == (
        f"flagsight: organization {tenant.organization_id} has no environment 'staging'"
        " (its environments: production)\n"
    )


def test_an_upload_to_the_service_shows_on_the_flag(
    tmp_path: Path, cli: Cli, module_server: GunicornServer, module_server_admin: Admin
) -> None:
    tenant: Tenant = module_server_admin.tenant()
    env = tenant.environment_id
    module_server_admin.flag(env, "new-checkout", [{"type": "STATIC"}])
    module_server_admin.flag(env, "dark-mode", [{"type": "STATIC"}])
    write(tmp_path, {"app.py": "on('new-checkout')\non('dark-mode')\n", "b.py": "new-checkout\n"})
    uploaded = cli(str(tmp_path), "--env", env, "--upload", "--repository", "acme/shop",
                   url=module_server.url)  # fmt: skip
    assert uploaded.status == 0, uploaded.err
    flag = module_server_admin.request("GET", f"/environments/{env}/flags/new-checkout")
    references = flag["lifecycle"]["codeReferences"]
    assert (references["count"], references["repository"]) == (2, "acme/shop")
    assert references["scannedAt"] is not None

    write(tmp_path, {"b.py": "nothing here\n"})  # a new scan replaces the repository's
    assert cli(str(tmp_path), "--env", env, "--upload", "--repository", "acme/shop",
               url=module_server.url).status == 0  # fmt: skip
    flag = module_server_admin.request("GET", f"/environments/{env}/flags/new-checkout")
    assert flag["lifecycle"]["codeReferences"]["count"] == 1
