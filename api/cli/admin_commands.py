"""``flagsight flags|keys|rollout|metrics|status|code-refs``: everyday admin work from a shell,
over the admin API.

Why these talk to a running service (through ``api.cli.admin_client``) while ``init`` opens the
store: they change what a live service serves, so they go where every admin client goes (the
token check, validation, the audit log, propagation to every worker and host) and answer with
the same errors. ``api.cli.main`` only registers them.

What a user sees: the answer as a table, or with ``--json`` the API's JSON as it was sent
(nothing for a ``204``), and exit status 0. An error answer is printed as the API gave it,
``flagsight: 404 Not Found: <message>`` (with ``--json``, its body) on stderr, exit status 1;
so is a service that does not answer. What is refused before any call (a URL without a
scheme, no token, an organization left to choose) exits 2, as argparse's own usage errors do.

Flags, keys, rollouts and code references live in an environment, which the admin API
addresses by id (metrics live in an organization: ``--org`` alone):
``--env`` takes the id (``env_...``) or the key (``production``), a key being looked up in
``--org`` (an id or an exact name), which may be left out while the service has a single
organization.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flagsight_core.contract import MAX_NAME_LENGTH
from flagsight_core.words import counted

from api.cli import code_refs
from api.cli.admin_client import (
    AdminApiError,
    AdminClient,
    InvalidBaseUrl,
    ServiceUnreachable,
    check_base_url,
    segment,
)
from api.controlplane.catalogue import BUILT_IN, DEFAULT_GUARDRAILS
from api.controlplane.changes import GUARDRAIL_UNITS, step_of

if TYPE_CHECKING:
    from api.settings import Settings

DEFAULT_URL = "http://127.0.0.1:8000"
"""Where ``flagsight serve`` and ``make run`` listen by default."""
DEFAULT_ENVIRONMENT = "production"
"""The environment ``flagsight init``'s demo makes, and the usual first one."""
ENVIRONMENT_ID = re.compile(r"env_[0-9a-f]{16}")
ORGANIZATION_ID = re.compile(r"org_[0-9a-f]{16}")
METRIC_KINDS = ("conversion", "count", "sum", "mean")
METRIC_FIELDS = ("name", "event", "kind", "windowHours", "better")
"""A metric's body: ``metrics put`` sends it whole, as the API replaces a metric whole."""
STATUS_ORGANIZATIONS = 50
"""``status`` looks up usage for at most this many organizations (two calls each)."""

Handler = Callable[[AdminClient, argparse.Namespace], int]


class UsageProblem(Exception):
    """Refused by the CLI itself (not by the API), with the exit status to leave with."""

    def __init__(self, message: str, exit_status: int = 2):
        super().__init__(message)
        self.message = message
        self.exit_status = exit_status


@dataclass(frozen=True)
class Environment:
    id: str
    key: str

    def __str__(self) -> str:
        return f"{self.key} ({self.id})"


# --- wiring -------------------------------------------------------------------------------


def add_admin_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``flags``, ``keys``, ``rollout``, ``metrics``, ``status`` and ``code-refs`` on
    ``flagsight``'s subparsers."""
    service = _service_options()
    scoped = [service, _environment_options()]

    flags = _group(
        sub,
        "flags",
        "list, show, enable or disable flags, or set their metrics (over the admin API)",
    )
    listed = _command(flags, "list", flags_list, "the environment's flags, by key", scoped)
    listed.add_argument(
        "--stale",
        action="store_true",
        help="only the stale flags (lifecycle stage stale: expired, unevaluated or launched"
        " long ago), with why",
    )
    _command(flags, "show", flags_show, "one flag and its rules", scoped, flag=True)
    _command(
        flags, "health", flags_health,
        "its release health: each comparison of the arms, and each followed metric", scoped,
        flag=True,
    )  # fmt: skip
    _command(flags, "enable", flags_enable, "turn a flag on (its rules decide)", scoped, flag=True)
    _command(flags, "disable", flags_disable, "turn a flag off for everyone", scoped, flag=True)
    follows = _command(
        flags, "metrics", flags_metrics,
        "show the metrics a flag follows, or set them (release health compares them)", scoped,
        flag=True,
    )  # fmt: skip
    follows.add_argument(
        "metrics", metavar="METRIC_KEY", nargs="*",
        help="the metrics to follow, replacing those it follows (none: show them)",
    )  # fmt: skip
    follows.add_argument("--clear", action="store_true", help="follow no metric")

    keys = _group(sub, "keys", "list, create or revoke API keys (over the admin API)")
    _command(keys, "list", keys_list, "the environment's live API keys, without secrets", scoped)
    create = _command(keys, "create", keys_create, "make an API key; prints it once", scoped)
    create.add_argument(
        "--name", default="", help=f"what uses the key (up to {MAX_NAME_LENGTH} characters)"
    )
    revoke = _command(keys, "revoke", keys_revoke, "revoke a key: 401 within a second", [service])
    revoke.add_argument("key_id", metavar="KEY_ID", help="the key's id (key_...), not the key")

    rollout = _group(sub, "rollout", "start, show or stop a flag's guarded rollout")
    started = "start (or restart) a guarded rollout of the flag's first PERCENTAGE rule"
    start = _command(rollout, "start", rollout_start, started, scoped, flag=True)
    start.add_argument(
        "--steps", type=_numbers, metavar="P,P,...", help="percentages (default 10,25,50,100)"
    )
    start.add_argument("--step-minutes", type=float, help="minutes per step (default 10)")
    start.add_argument(
        "--guardrails",
        type=_names,
        metavar="NAME,...",
        help=f"what may roll it back (default {','.join(DEFAULT_GUARDRAILS)}; a metric of the"
        " organization as metric:KEY)",
    )
    start.add_argument(
        "--tolerances",
        type=_tolerances,
        metavar="NAME=VALUE,...",
        help="the largest regression accepted per guardrail, e.g. failureRate=0.5,"
        f"latencyP95Ms=80 (defaults: {_default_tolerances()};"
        " a metric's in its unit: points for a conversion, default 1, required otherwise)",
    )
    shown, stopped = "the rollout's state, step and decisions", "stop it; the percentage stays"
    _command(rollout, "show", rollout_show, shown, scoped, flag=True)
    _command(rollout, "stop", rollout_stop, stopped, scoped, flag=True)

    _add_metric_commands(sub, [service, _organization_options()])

    status = sub.add_parser(
        "status",
        parents=[service],
        help="is the service ready; its organizations and this month's usage",
        description="Readiness (/readyz), the API version, and each organization's plan,"
        " environments and evaluations this month. Exit status 1 when not ready.",
    )
    status.add_argument("--org", help="only this organization (id or exact name)")
    status.set_defaults(func=_runner(show_status))

    refs = sub.add_parser(
        "code-refs",
        parents=scoped,
        help="find the environment's flag keys in a source tree; --upload sends them",
        description="Print each line of PATH's files (those git would not ignore) naming one"
        " of the environment's flag keys as a whole token, as PATH:LINE KEY; with --upload,"
        " send them to the service for the flags' lifecycle (contract section 14).",
    )
    refs.add_argument(
        "path", metavar="PATH", nargs="?", default=".", help="the tree to scan (default: .)"
    )
    refs.add_argument(
        "--upload", action="store_true", help="send the references to the service as well"
    )
    refs.add_argument(
        "--repository",
        help="the repository's name for --upload (default: the git remote origin's URL, else"
        " PATH's directory name)",
    )
    refs.set_defaults(func=_runner(code_references))


def _group(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str, summary: str
) -> argparse._SubParsersAction[argparse.ArgumentParser]:
    parser = sub.add_parser(name, help=summary, description=_sentence(summary))
    return parser.add_subparsers(dest=f"{name}_command", required=True, metavar="COMMAND")


def _command(
    group: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    handler: Handler,
    summary: str,
    parents: list[argparse.ArgumentParser],
    *,
    flag: bool = False,
) -> argparse.ArgumentParser:
    parser = group.add_parser(name, parents=parents, help=summary, description=_sentence(summary))
    if flag:
        parser.add_argument("flag", metavar="FLAG_KEY", help="the flag's key (case-sensitive)")
    parser.set_defaults(func=_runner(handler))
    return parser


def _sentence(summary: str) -> str:
    return summary[0].upper() + summary[1:] + "."


def _service_options() -> argparse.ArgumentParser:
    """Options of every command: on each leaf, where argparse keeps their values."""
    parent = argparse.ArgumentParser(add_help=False)
    group = parent.add_argument_group("service")
    group.add_argument(
        "--url", help=f"the service's base URL (default: $FLAGSIGHT_URL, else {DEFAULT_URL})"
    )
    group.add_argument(
        "--token",
        help="the admin token (default: $FLAGSIGHT_ADMIN_TOKEN; prefer it, a command line is"
        " visible to every user of this machine)",
    )
    group.add_argument(
        "--json", action="store_true", help="print the API's JSON answer instead of a table"
    )
    return parent


def _add_metric_commands(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], parents: list[argparse.ArgumentParser]
) -> None:
    metrics = _group(sub, "metrics", "list, show, put or delete an organization's metrics")
    _command(metrics, "list", metrics_list, "the organization's metrics, by key", parents)
    for name, handler, summary in (
        ("show", metrics_show, "one metric"),
        ("put", metrics_put, "create or change a metric (options left out keep their values)"),
        ("delete", metrics_delete, "delete a metric (refused while a rollout guards on it)"),
    ):
        command = _command(metrics, name, handler, summary, parents)
        command.add_argument("metric", metavar="METRIC_KEY", help="the metric's key")
    put = metrics.choices["put"]
    put.add_argument("--name", help="how people read it")
    put.add_argument("--event", help="the tracked events' name")
    put.add_argument("--kind", choices=METRIC_KINDS, help="what it makes of a user's events")
    put.add_argument(
        "--window-hours", type=int, help="how long after a user's first exposure (1 to 720)"
    )
    put.add_argument("--better", choices=("higher", "lower"), help="which direction improves")


def _organization_options() -> argparse.ArgumentParser:
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument_group("where").add_argument(
        "--org",
        help="organization id or exact name (default: $FLAGSIGHT_ORG, else the only organization)",
    )
    return parent


def _environment_options() -> argparse.ArgumentParser:
    parent = argparse.ArgumentParser(add_help=False)
    group = parent.add_argument_group("where")
    group.add_argument(
        "--org",
        help="organization id or exact name, to look --env's key up in (default:"
        " $FLAGSIGHT_ORG, else the only organization)",
    )
    group.add_argument(
        "--env",
        help=f"environment id (env_...) or key (default: $FLAGSIGHT_ENV, else"
        f" {DEFAULT_ENVIRONMENT})",
    )
    return parent


def _numbers(text: str) -> list[int | float]:
    """``1,5,25.5`` as JSON numbers; the API judges them (increasing, the last 100, ...)."""
    try:
        values = [float(item) for item in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a list of numbers like 1,5,25") from None
    return [int(v) if v.is_integer() else v for v in values]


def _names(text: str) -> list[str]:
    return [item.strip() for item in text.split(",")]


def _tolerances(text: str) -> dict[str, int | float]:
    """``failureRate=0.5,latencyP95Ms=80`` as a JSON object; the API judges the names."""
    tolerances: dict[str, int | float] = {}
    for item in text.split(","):
        name, _, value = item.partition("=")
        try:
            [number] = _numbers(value)
        except (argparse.ArgumentTypeError, ValueError):
            raise argparse.ArgumentTypeError(
                f"{item.strip()!r} is not NAME=NUMBER, like failureRate=0.5"
            ) from None
        tolerances[name.strip()] = number
    return tolerances


def _runner(handler: Handler) -> Callable[[Settings, argparse.Namespace], int]:
    """``handler`` as ``flagsight``'s commands are called, with every failure printed."""

    def run(settings: Settings, args: argparse.Namespace) -> int:
        try:
            return handler(_client(args), args)
        except UsageProblem as problem:
            print(f"flagsight: {problem.message}", file=sys.stderr)
            return problem.exit_status
        except AdminApiError as error:
            shown = json.dumps(error.body) if args.json else f"flagsight: {error}"
            print(shown, file=sys.stderr)
            return 1
        except ServiceUnreachable as failure:
            print(f"flagsight: {failure}", file=sys.stderr)
            return 1

    return run


def _client(args: argparse.Namespace) -> AdminClient:
    """The base URL and the admin token, checked before anything is sent."""
    from_env = os.environ.get("FLAGSIGHT_URL")
    source = "--url" if args.url else "FLAGSIGHT_URL" if from_env else "the default URL"
    try:
        url = check_base_url(args.url or from_env or DEFAULT_URL, source=source)
    except InvalidBaseUrl as refused:
        raise UsageProblem(str(refused)) from None
    token = args.token or os.environ.get("FLAGSIGHT_ADMIN_TOKEN")
    if not token:
        raise UsageProblem(
            "no admin token: set FLAGSIGHT_ADMIN_TOKEN (the token the server uses, or the one"
            " `flagsight init` printed), or give --token"
        )
    if not token.isprintable():
        raise UsageProblem("the admin token contains a control character (a stray newline?)")
    return AdminClient(url, token)


# --- where: organization and environment --------------------------------------------------


def _environment(client: AdminClient, args: argparse.Namespace) -> Environment:
    """The environment ``--env`` names: an id as is (checked), a key within ``--org``."""
    wanted = args.env or os.environ.get("FLAGSIGHT_ENV") or DEFAULT_ENVIRONMENT
    if ENVIRONMENT_ID.fullmatch(wanted):
        return Environment(wanted, client.get(f"/environments/{wanted}")["key"])
    organization = _organization(client, args.org or os.environ.get("FLAGSIGHT_ORG"))
    environments = client.get(f"/organizations/{segment(organization)}/environments")["items"]
    for environment in environments:
        if environment["key"] == wanted:
            return Environment(environment["id"], environment["key"])
    known = ", ".join(environment["key"] for environment in environments) or "none"
    raise UsageProblem(
        f"organization {organization} has no environment {wanted!r} (its environments: {known})",
        exit_status=1,
    )


def _organization(client: AdminClient, chosen: str | None) -> str:
    """The id of the organization ``chosen`` names, or of the only one when none is chosen."""
    if chosen and ORGANIZATION_ID.fullmatch(chosen):
        return chosen
    organizations = client.get("/organizations")["items"]
    if chosen:
        named = [org for org in organizations if org["name"] == chosen]
        if len(named) == 1:
            return str(named[0]["id"])
        if not named:
            raise UsageProblem(
                f"no organization has the id or name {chosen!r}; the service has"
                f" {_listing(organizations)}",
                exit_status=1,
            )
        raise UsageProblem(
            f"{len(named)} organizations are named {chosen!r}: give --org the id of one of"
            f" {_listing(named)}"
        )
    if len(organizations) == 1:
        return str(organizations[0]["id"])
    if not organizations:
        raise UsageProblem(
            "the service has no organization yet (create one: docs/admin-api.md)", exit_status=1
        )
    raise UsageProblem(
        f"choose an organization with --org or FLAGSIGHT_ORG; the service has"
        f" {_listing(organizations)}"
    )


def _listing(organizations: Sequence[dict[str, Any]], shown: int = 10) -> str:
    names = ", ".join(f"{org['id']} ({org['name']})" for org in organizations[:shown])
    more = f" and {len(organizations) - shown} more" if len(organizations) > shown else ""
    return f"{counted(len(organizations), 'organization')}: {names}{more}" if names else "none"


# --- flags --------------------------------------------------------------------------------


def flags_list(client: AdminClient, args: argparse.Namespace) -> int:
    environment = _environment(client, args)
    query = "?lifecycle=stale" if args.stale else ""
    answer = client.get(f"/environments/{environment.id}/flags{query}")
    if args.json:
        return _print_json(answer)
    flags = answer["items"]
    if not flags:
        print(f"No {'stale ' if args.stale else ''}flags in {environment}.")
        return 0
    if args.stale:
        rows = [(f["key"], _owner(f), _why_stale(f["lifecycle"]), _last_seen(f)) for f in flags]
        print(_table(("KEY", "OWNER", "WHY", "LAST EVALUATED"), rows))
        return 0
    rows = [(f["key"], _state(f), _stage(f), _rules(f["rules"]), f["updatedAt"]) for f in flags]
    print(_table(("KEY", "STATE", "LIFECYCLE", "RULES", "UPDATED"), rows))
    return 0


STALE_WHY = {
    "expired": "past its expiry",
    "not-evaluated-30d": "not evaluated lately",
    "launched-30d": "launched long ago",
}
"""The reasons of a stale flag (``warehouse.lifecycle``) in a few words each."""


def _stage(flag: dict[str, Any]) -> str:
    return flag.get("lifecycle", {}).get("stage", "-")


def _owner(flag: dict[str, Any]) -> str:
    return flag.get("owner") or "-"


def _why_stale(lifecycle: dict[str, Any]) -> str:
    return ", ".join(STALE_WHY.get(reason, reason) for reason in lifecycle["reasons"])


def _last_seen(flag: dict[str, Any]) -> str:
    return flag["lifecycle"]["lastEvaluatedAt"] or "never"


def flags_show(client: AdminClient, args: argparse.Namespace) -> int:
    environment = _environment(client, args)
    flag = client.get(_flag_path(environment, args.flag))
    if args.json:
        return _print_json(flag)
    _print_flag(flag, environment)
    return 0


def flags_health(client: AdminClient, args: argparse.Namespace) -> int:
    """The health answer in lines: the split and its sample ratio, one line per comparison of
    the catalogue, then one per followed metric."""
    environment = _environment(client, args)
    health = client.get(_flag_path(environment, args.flag) + "/health")
    if args.json:
        return _print_json(health)
    ratio = health["sampleRatio"]
    split = "no split (no percentage rule)"
    if health["percentage"] is not None:
        split = f"{_percent(health['percentage'])} in treatment"
        if ratio["observed"] is not None:
            mismatch = ", MISMATCH: decisions withheld" if ratio["mismatch"] else ""
            split += f"; observed {ratio['observed']:.4f} (p = {ratio['pValue']:.3g}){mismatch}"
    fields = [("flag", args.flag), ("environment", str(environment)), ("split", split),
              ("computed", health["computedAt"])]  # fmt: skip
    for measure in BUILT_IN:
        fields.append((measure.label, _compared(health[measure.name], measure.unit)))
    for key, metric in health.get("metrics", {}).items():
        arms = " vs ".join(
            f"{arm} {_mean(metric[arm]['mean'])} ({metric[arm]['users']:,} users)"
            for arm in ("treatment", "control")
        )
        narrower = metric.get("varianceReduction")
        reduced = f"; interval {narrower:.0%} narrower from pre-exposure data" if narrower else ""
        fields.append((f"metric:{key}", f"{arms}; {_compared(metric, '')}{reduced}"))
    if health["withheldReason"]:
        fields.append(("withheld", health["withheldReason"]))
    print(_fields(fields))
    return 0


def _compared(comparison: dict[str, Any], unit: str) -> str:
    """``+0.42 pp [-0.1, +0.9], inconclusive``: a comparison's difference, interval and
    decision; the decision alone when withheld."""
    if comparison["ci"] is None or comparison["difference"] is None:
        return comparison["decision"]
    low, high = comparison["ci"]
    unit = f" {unit}" if unit else ""
    return (
        f"{comparison['difference']:+.4g}{unit} [{low:+.4g}, {high:+.4g}], {comparison['decision']}"
    )


def _mean(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def flags_enable(client: AdminClient, args: argparse.Namespace) -> int:
    return _set_enabled(client, args, True)


def flags_disable(client: AdminClient, args: argparse.Namespace) -> int:
    return _set_enabled(client, args, False)


def _set_enabled(client: AdminClient, args: argparse.Namespace, enabled: bool) -> int:
    """Read the flag, then put it back with only ``enabled`` changed (the API replaces a flag
    whole). A flag already so is left alone: no write, no audit record, no webhook."""
    environment = _environment(client, args)
    path = _flag_path(environment, args.flag)
    flag = client.get(path)
    word = "enabled" if enabled else "disabled"
    if flag["enabled"] == enabled:
        said = f"Flag {args.flag!r} is already {word} in {environment}; nothing changed."
    else:
        kept = ("archived", "rules", "kind", "owner", "expiresAt")
        body = {"enabled": enabled, **{name: flag[name] for name in kept if name in flag}}
        flag = client.put(path, body)
        said = f"Flag {args.flag!r} {word} in {environment}."
    if args.json:
        return _print_json(flag)
    print(said)
    if enabled and flag["archived"]:
        print("It is archived, so evaluations still answer FLAG_ARCHIVED.")
    return 0


def flags_metrics(client: AdminClient, args: argparse.Namespace) -> int:
    """Set the metrics the flag follows when any (or ``--clear``) is given; show them."""
    environment = _environment(client, args)
    path = _flag_path(environment, args.flag)
    if args.metrics and args.clear:
        raise UsageProblem("give metric keys or --clear, not both")
    if args.metrics or args.clear:
        answer = client.put(f"{path}/metrics", {"metrics": args.metrics})
        said = f"Flag {args.flag!r} in {environment} now follows"
    else:
        answer = client.get(f"{path}/followed-metrics")
        said = f"Flag {args.flag!r} in {environment} follows"
    if args.json:
        return _print_json(answer)
    keys = answer["metrics"]
    print(f"{said} {', '.join(keys)}." if keys else f"{said} no metric.")
    return 0


def _flag_path(environment: Environment, flag_key: str) -> str:
    return f"/environments/{environment.id}/flags/{segment(flag_key)}"


def _print_flag(flag: dict[str, Any], environment: Environment) -> None:
    print(
        _fields(
            [
                ("flag", flag["key"]),
                ("environment", str(environment)),
                ("state", _state(flag)),
                ("kind", flag.get("kind", "temporary")),
                ("owner", flag.get("owner") or "-"),
                ("expires", flag.get("expiresAt") or "never"),
                ("lifecycle", _lifecycle(flag)),
                ("updated", flag["updatedAt"]),
                ("rules", "none: every evaluation answers false" if not flag["rules"] else ""),
            ]
        )
    )
    for number, rule in enumerate(flag["rules"], 1):
        print(f"  {number}. {_rule(rule)}")


def _lifecycle(flag: dict[str, Any]) -> str:
    """``stale (expired, ...)``, then the evidence a person asks first: seen when, by whom."""
    lifecycle = flag.get("lifecycle")
    if not lifecycle:
        return "-"
    words = f"{lifecycle['stage']} ({', '.join(lifecycle['reasons'])})"
    seen = lifecycle["lastEvaluatedAt"]
    apps = ", ".join(lifecycle["applications"]) or "no application"
    references = lifecycle["codeReferences"]["count"]
    return (
        f"{words}; last evaluated {seen or 'never'} by {apps};"
        f" {counted(references, 'code reference')}"
    )


def _state(flag: dict[str, Any]) -> str:
    """As evaluation sees it: archived wins over disabled."""
    if flag["archived"]:
        return "archived"
    return "enabled" if flag["enabled"] else "disabled"


def _rules(rules: Sequence[dict[str, Any]]) -> str:
    return "; ".join(_rule(rule) for rule in rules) or "-"


def _rule(rule: dict[str, Any]) -> str:
    kind = rule.get("type")
    if kind == "SEGMENT":
        kind = f"SEGMENT {rule.get('segment')}"
    elif kind == "PERCENTAGE":
        kind = f"PERCENTAGE {_percent(rule.get('percentage'))}"
        if rule.get("segment") is not None:
            kind += f" within {rule['segment']}"
    elif kind != "STATIC":
        return json.dumps(rule)  # a rule type newer than this CLI
    return f"{kind} -> {json.dumps(rule.get('value', True))}"


# --- API keys -----------------------------------------------------------------------------


def keys_list(client: AdminClient, args: argparse.Namespace) -> int:
    environment = _environment(client, args)
    answer = client.get(f"/environments/{environment.id}/api-keys")
    if args.json:
        return _print_json(answer)
    keys = answer["items"]
    if not keys:
        print(f"No live API keys in {environment}.")
        return 0
    rows = [(key["id"], key["name"] or "-", key["createdAt"]) for key in keys]
    print(_table(("ID", "NAME", "CREATED"), rows))
    return 0


def keys_create(client: AdminClient, args: argparse.Namespace) -> int:
    """The secret goes to stdout, on its own last line, this once: the service keeps its hash."""
    environment = _environment(client, args)
    created = client.post(f"/environments/{environment.id}/api-keys", {"name": args.name})
    if args.json:
        return _print_json(created)
    named = f" ({created['name']!r})" if created["name"] else ""
    print(f"Created API key {created['id']}{named} in {environment}.")
    print("The key is shown this once (only its hash is kept):")
    print(created["key"])
    return 0


def keys_revoke(client: AdminClient, args: argparse.Namespace) -> int:
    client.delete(f"/api-keys/{segment(args.key_id)}")
    if not args.json:
        print(f"Revoked API key {args.key_id}: calls with it get 401 within a second.")
    return 0


# --- rollouts -----------------------------------------------------------------------------


def rollout_start(client: AdminClient, args: argparse.Namespace) -> int:
    """Only the options given are sent: the API's defaults (docs/admin-api.md) fill the rest."""
    environment = _environment(client, args)
    plan: dict[str, Any] = {}
    if args.steps is not None:
        plan["steps"] = args.steps
    if args.step_minutes is not None:
        plan["stepMinutes"] = args.step_minutes
    if args.guardrails is not None:
        plan["guardrails"] = args.guardrails
    if args.tolerances is not None:
        plan["tolerances"] = args.tolerances
    rollout = client.put(_flag_path(environment, args.flag) + "/rollout", plan)
    if args.json:
        return _print_json(rollout)
    print(f"Started the guarded rollout of {args.flag!r} in {environment}.")
    _print_rollout(rollout)
    return 0


def rollout_show(client: AdminClient, args: argparse.Namespace) -> int:
    environment = _environment(client, args)
    rollout = client.get(_flag_path(environment, args.flag) + "/rollout")
    if args.json:
        return _print_json(rollout)
    print(f"Guarded rollout of {args.flag!r} in {environment}:")
    _print_rollout(rollout)
    return 0


def rollout_stop(client: AdminClient, args: argparse.Namespace) -> int:
    environment = _environment(client, args)
    client.delete(_flag_path(environment, args.flag) + "/rollout")
    if not args.json:
        print(
            f"Stopped the rollout of {args.flag!r} in {environment}; its percentage stays"
            " where it is."
        )
    return 0


def _print_rollout(rollout: dict[str, Any]) -> None:
    """Steps are counted from 1 here, as on the dashboard (the API's ``step`` is an index
    into ``steps``, from 0: ``step_of``)."""
    steps = rollout["steps"]
    fields = [
        ("state", rollout["state"]),
        ("step", f"{step_of(rollout['step'], steps)}, since {rollout['stepStartedAt']}"),
        ("percentage", _percent(rollout["percentage"])),
        ("plan", f"{' '.join(_percent(s) for s in steps)}, {rollout['stepMinutes']:g} min a step"),
        ("guardrails", ", ".join(_guardrail(rollout, g) for g in rollout["guardrails"])),
    ]
    guard = rollout.get("guard")
    for name, evidence in (guard or {}).get("guardrails", {}).items():
        fields.append((f"  {name}", _evidence(name, evidence)))
    waiting = rollout.get("waiting")
    if waiting:
        fields.append(("waiting", f"since {waiting['since']}: {waiting['reason']}"))
    decisions = rollout["decisions"]
    fields.append(("decisions", "" if decisions else "none yet"))
    print(_fields(fields))
    if decisions:
        rows = [
            (d["at"], step_of(d["step"], steps), d["action"], _percent(d["percentage"]),
             d["reason"])
            for d in decisions
        ]  # fmt: skip
        print(_indent(_table(("AT", "STEP", "DECISION", "THEN AT", "REASON"), rows)))


def _guardrail(rollout: dict[str, Any], name: str) -> str:
    """A guardrail with its tolerance (rollouts started before tolerances show none)."""
    tolerance = rollout.get("tolerances", {}).get(name)
    return name if tolerance is None else f"{name} (tolerance {tolerance:g} {_unit(name)})"


def _default_tolerances() -> str:
    """``failureRate 1 pp, ...``: each built-in guardrail's default tolerance, from the
    catalogue."""
    return ", ".join(f"{m.name} {m.tolerance:g} {m.unit}" for m in BUILT_IN if m.tolerance)


def _unit(guardrail: str) -> str:
    """A built-in guardrail's unit; a metric's is its kind's, which the rollout does not say."""
    return GUARDRAIL_UNITS.get(guardrail, "in the metric's unit")


def _evidence(name: str, evidence: dict[str, Any]) -> str:
    """One guardrail's evidence over the rollout, as ``GET .../rollout`` gives it."""
    unit = _unit(name)
    low, high = evidence["ci"]

    def end(value: float | None, infinite: str) -> str:
        return infinite if value is None else f"{value:+.3g}"

    text = (
        f"{evidence['status']}: interval [{end(low, '-inf')}, {end(high, '+inf')}] {unit},"
        f" {evidence['users']['treatment']:,} treatment and {evidence['users']['control']:,}"
        " control users"
    )
    if evidence.get("usersNeeded") is not None:
        text += f"; about {counted(evidence['usersNeeded'], 'more user')} needed"
    return text


# --- metrics ------------------------------------------------------------------------------


def metrics_list(client: AdminClient, args: argparse.Namespace) -> int:
    organization = _chosen_organization(client, args)
    answer = client.get(f"/organizations/{segment(organization)}/metrics")
    if args.json:
        return _print_json(answer)
    if not answer["items"]:
        print(f"No metrics in organization {organization}.")
        return 0
    rows = [
        (m["key"], m["name"], m["event"], m["kind"], f"{m['windowHours']} h", m["better"],
         m["updatedAt"])
        for m in answer["items"]
    ]  # fmt: skip
    print(_table(("KEY", "NAME", "EVENT", "KIND", "WINDOW", "BETTER", "UPDATED"), rows))
    return 0


def metrics_show(client: AdminClient, args: argparse.Namespace) -> int:
    metric = client.get(_metric_path(client, args))
    if args.json:
        return _print_json(metric)
    _print_metric(metric)
    return 0


def metrics_put(client: AdminClient, args: argparse.Namespace) -> int:
    """The metric as it is (none: a new one), with the options given in place of its values:
    the API replaces a metric whole, and names what a new one is missing."""
    path = _metric_path(client, args)
    try:
        current = client.get(path)
    except AdminApiError as error:
        if error.status != 404:
            raise
        current = {}
    given = {"name": args.name, "event": args.event, "kind": args.kind,
             "windowHours": args.window_hours, "better": args.better}  # fmt: skip
    body = {f: given[f] if given[f] is not None else current.get(f) for f in METRIC_FIELDS}
    metric = client.put(path, {f: v for f, v in body.items() if v is not None})
    if args.json:
        return _print_json(metric)
    print(f"{'Changed' if current else 'Created'} metric {args.metric!r}.")
    _print_metric(metric)
    return 0


def metrics_delete(client: AdminClient, args: argparse.Namespace) -> int:
    client.delete(_metric_path(client, args))
    if not args.json:
        print(f"Deleted metric {args.metric!r}; no flag follows it any more.")
    return 0


def _metric_path(client: AdminClient, args: argparse.Namespace) -> str:
    organization = _chosen_organization(client, args)
    return f"/organizations/{segment(organization)}/metrics/{segment(args.metric)}"


def _chosen_organization(client: AdminClient, args: argparse.Namespace) -> str:
    """The organization ``--org`` (else ``$FLAGSIGHT_ORG``, else the only one) names."""
    return _organization(client, args.org or os.environ.get("FLAGSIGHT_ORG"))


def _print_metric(metric: dict[str, Any]) -> None:
    print(
        _fields(
            [
                ("metric", metric["key"]),
                ("name", metric["name"]),
                ("event", metric["event"]),
                ("kind", metric["kind"]),
                ("window", f"{metric['windowHours']} hours after a user's first exposure"),
                ("better", metric["better"]),
                ("created", metric["createdAt"]),
                ("updated", metric["updatedAt"]),
            ]
        )
    )


# --- code references ----------------------------------------------------------------------


def code_references(client: AdminClient, args: argparse.Namespace) -> int:
    """Scan PATH for the environment's flag keys (``api.cli.code_refs`` says how); print them,
    and with ``--upload`` send them for the flags' lifecycle (contract section 14)."""
    root = Path(args.path)
    if not root.is_dir():
        raise UsageProblem(f"{args.path!r} is not a directory")
    environment = _environment(client, args)
    flags = client.get(f"/environments/{environment.id}/flags")["items"]
    references = code_refs.scan(
        root, [flag["key"] for flag in flags], progress=code_refs.Progress()
    )
    if not args.upload:
        if args.json:
            return _print_json(code_refs.references_json(references))
        sys.stdout.write(code_refs.reference_lines(references))
        return 0
    repository = code_refs.repository_name(root, args.repository)
    revision = code_refs.revision(root)
    body = code_refs.upload_body(references, repository, revision)
    answer = client.put(f"/environments/{environment.id}/code-refs", body)
    if args.json:
        return _print_json({**body, "answer": answer})
    sys.stdout.write(code_refs.reference_lines(references))
    print(code_refs.upload_summary(references, repository, revision))
    return 0


# --- status -------------------------------------------------------------------------------


def show_status(client: AdminClient, args: argparse.Namespace) -> int:
    """Readiness first (it needs no token, and says most); then, over the admin API, what the
    service holds and how much of each plan this month has used."""
    code, answer = client.call("GET", "/readyz", authorize=False, accept=(503,))
    readiness: dict[str, Any] = answer if isinstance(answer, dict) else {}
    document = client.call("GET", "/openapi.json", authorize=False)[1] or {}
    api_version = document.get("info", {}).get("version", "unknown")
    ready = code == 200
    organizations = _status_organizations(client, args.org)
    overview = [
        {
            **org,
            "environments": client.get(f"/organizations/{org['id']}/environments")["items"],
            "usage": client.get(f"/organizations/{org['id']}/usage"),
        }
        for org in organizations[:STATUS_ORGANIZATIONS]
    ]
    if args.json:
        _print_json(
            {
                "url": client.base_url,
                "ready": ready,
                "readiness": readiness,
                "apiVersion": api_version,
                "cliVersion": _cli_version(),
                "organizations": overview,
            }
        )
        return 0 if ready else 1
    print(f"flagsight at {client.base_url}: {readiness.get('status', code)}")
    checks = readiness.get("checks") or {}
    if checks:
        print(_indent(_fields([(name, str(result)) for name, result in checks.items()])))
    print(f"API version {api_version}; this CLI {_cli_version()}")
    print()
    _print_overview(overview, len(organizations))
    return 0 if ready else 1


def _status_organizations(client: AdminClient, chosen: str | None) -> list[dict[str, Any]]:
    if chosen:
        return [client.get(f"/organizations/{segment(_organization(client, chosen))}")]
    return list(client.get("/organizations")["items"])


def _print_overview(overview: list[dict[str, Any]], total: int) -> None:
    if not overview:
        print("No organizations yet.")
        return
    month = overview[0]["usage"]["month"]
    rows = [
        (
            org["id"],
            org["name"],
            org["plan"],
            ", ".join(env["key"] for env in org["environments"]) or "-",
            f"{org['usage']['evaluations']:,}",
            f"{org['usage']['limit']:,}",
            _usage_state(org["usage"]),
        )
        for org in overview
    ]
    headers = (
        "ORGANIZATION",
        "NAME",
        "PLAN",
        "ENVIRONMENTS",
        f"EVALUATIONS {month}",
        "LIMIT",
        "USED",
    )
    print(_table(headers, rows))
    if total > len(overview):
        print(f"... and {total - len(overview)} more organizations (choose one with --org)")


def _usage_state(usage: dict[str, Any]) -> str:
    """Blocked: every evaluation answers PLAN_LIMIT_EXCEEDED until the month ends."""
    if usage["blocked"]:
        return "blocked"
    if usage["overage"]:
        return "overage"
    return f"{usage['evaluations'] / usage['limit']:.0%}" if usage["limit"] else "-"


def _cli_version() -> str:
    try:
        return metadata.version("flagsight")
    except metadata.PackageNotFoundError:
        return "unknown"


# --- output -------------------------------------------------------------------------------


def _print_json(document: Any) -> int:
    print(json.dumps(document, indent=2, ensure_ascii=False))
    return 0


def _table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """Columns aligned on the widest cell, two spaces apart; no trailing blanks."""
    lines = [list(headers), *(list(row) for row in rows)]
    widths = [max(len(line[i]) for line in lines) for i in range(len(headers))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in lines
    )


def _fields(pairs: Sequence[tuple[str, str]]) -> str:
    width = max(len(name) for name, _ in pairs)
    return "\n".join(f"{name.ljust(width)}  {value}".rstrip() for name, value in pairs)


def _indent(text: str) -> str:
    return "\n".join("  " + line for line in text.splitlines())


def _percent(value: Any) -> str:
    return f"{value:g}%" if isinstance(value, int | float) else str(value)
