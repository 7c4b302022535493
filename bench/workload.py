"""The benchmark's tenant, flag and request bodies, set up through the public and admin APIs."""

from __future__ import annotations

import json
import random
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import requests

FLAG_KEY = "checkout-redesign"
SEGMENT_KEY = "beta-testers"
RULES = [
    {"type": "SEGMENT", "segment": SEGMENT_KEY, "value": True},
    {"type": "PERCENTAGE", "percentage": 50, "value": True},
]
"""A segment first, then a 50% rollout: most users are bucketed (a murmur3 hash each)."""
TARGETED_FLAG_KEY = "checkout-targeted"
TARGETED_SEGMENT_KEY = "pro-in-germany"
CONDITIONS = [
    {"attribute": "country", "operator": "EQUALS", "values": ["DE"]},
    {"attribute": "plan", "operator": "IN", "values": ["pro", "business", "enterprise"]},
    {"attribute": "appVersion", "operator": "SEMVER_GREATER_THAN", "values": ["2.3.0"]},
    {"attribute": "seats", "operator": "GREATER_OR_EQUAL", "values": [5]},
    {"attribute": "email", "operator": "MATCHES", "values": [r"@(example|flagsight)\.(com|de)$"]},
]
"""The targeted segment's five conditions (contract 12): a string, a set, a version, a number
and a regular expression. ``attributes`` makes every user hold the first four, so that each
evaluation reads all five; three users in four hold the fifth too."""
TARGETED_RULES = [
    {"type": "SEGMENT", "segment": TARGETED_SEGMENT_KEY, "value": True},
    {"type": "PERCENTAGE", "percentage": 50, "value": True},
]
"""``RULES``' shape, its segment defined by ``CONDITIONS``: what attributes add to it."""
SINGLE_ATTRIBUTE_BYTES = 1024
"""A single evaluate's attributes object, as compact JSON (issue 41: "a 1 KB attributes
object")."""
ATTRIBUTE_VARIANTS = 64
"""Distinct attributes objects the scripts and the SDK scenario cycle through."""
CONFIG_PROPAGATION_S = 1.5
"""The contract: an admin change reaches every worker within one second."""
LIMIT = 10**15
"""Metering is exact and on every request, but the benchmark must never hit the threshold."""
TRACK_EVENTS = 500
"""Tracked events in one ``/v1/track`` body: the most the service takes (contract 13)."""
TRACK_NAMES = ("purchase", "add-to-cart", "signup")


@dataclass(frozen=True)
class Workload:
    api_key: str
    flag_key: str
    bulk_1k: Path
    bulk_10k: Path
    feedback_500: Path
    evaluation_ids: Path
    targeted_flag_key: str | None = None
    attributes_1k: Path | None = None
    """``ATTRIBUTE_VARIANTS`` objects of ``SINGLE_ATTRIBUTE_BYTES``, one a line."""
    bulk_10k_attributes: Path | None = None
    track_500: Path | None = None
    """``POST /v1/track`` bodies of ``TRACK_EVENTS`` events, one a line."""


def _admin(url: str, token: str, method: str, path: str, body: object) -> dict:
    answer = requests.request(
        method, f"{url}/admin/v1{path}", json=body,
        headers={"Authorization": f"Bearer {token}"}, timeout=30,
    )  # fmt: skip
    if answer.status_code not in (200, 201):
        raise RuntimeError(f"{method} {path}: {answer.status_code} {answer.text[:500]}")
    return answer.json()


def create_tenant(url: str, token: str, *, targeted: bool = False) -> tuple[str, str]:
    """An enterprise organization, its production environment (insights on), a key, the flag;
    with ``targeted``, also the flag on a segment of conditions (``create_targeted_flag``)."""
    org = _admin(url, token, "POST", "/organizations",
                 {"name": "Bench", "plan": "enterprise", "monthlyEvaluationLimit": LIMIT})  # fmt: skip
    env = _admin(url, token, "POST", f"/organizations/{org['id']}/environments",
                 {"key": "production", "insightsEnabled": True})  # fmt: skip
    key = _admin(url, token, "POST", f"/environments/{env['id']}/api-keys", {"name": "bench"})
    members = [f"beta-{i}" for i in range(1000)]
    _admin(url, token, "PUT", f"/organizations/{org['id']}/segments/{SEGMENT_KEY}",
           {"userIdentifiers": members})  # fmt: skip
    _admin(url, token, "PUT", f"/environments/{env['id']}/flags/{FLAG_KEY}",
           {"enabled": True, "rules": RULES})  # fmt: skip
    if targeted:
        create_targeted_flag(url, token, org["id"], env["id"])
    return key["key"], env["id"]


def create_targeted_flag(url: str, token: str, org_id: str, env_id: str) -> None:
    """``TARGETED_FLAG_KEY``: ``TARGETED_RULES`` on a segment of the same 1,000 listed users,
    100 excluded ones and ``CONDITIONS`` (the benchmark's users are in neither list, so each
    reaches the conditions)."""
    _admin(url, token, "PUT", f"/organizations/{org_id}/segments/{TARGETED_SEGMENT_KEY}", {
        "userIdentifiers": [f"beta-{i}" for i in range(1000)],
        "excludedUserIdentifiers": [f"excluded-{i}" for i in range(100)],
        "conditions": CONDITIONS,
    })  # fmt: skip
    _admin(url, token, "PUT", f"/environments/{env_id}/flags/{TARGETED_FLAG_KEY}",
           {"enabled": True, "rules": TARGETED_RULES})  # fmt: skip


def attributes(index: int, size: int | None = SINGLE_ATTRIBUTE_BYTES) -> dict[str, object]:
    """The ``index``-th user's attributes: the five ``CONDITIONS`` read (the first four hold,
    the fifth for three in four), then what an application typically adds; with ``size``,
    padded with a user agent to exactly ``size`` bytes of compact JSON."""
    attrs: dict[str, object] = {
        "country": "DE",
        "plan": ("pro", "business", "enterprise")[index % 3],
        "appVersion": f"2.{4 + index % 5}.{index % 13}",
        "seats": 5 + index % 200,
        "email": f"user{index}@{'other.org' if index % 4 == 0 else 'example.com'}",
        "locale": "de-DE",
        "company": f"Company {index % 97}",
    }
    if size is None:
        return attrs
    attrs |= {
        "timezone": "Europe/Berlin",
        "signupAt": f"2025-{1 + index % 12:02d}-14T09:26:53Z",
        "lastSeen": 1_760_000_000 + index,
        "beta": index % 2 == 0,
        "platform": ("ios", "android", "web")[index % 3],
        "osVersion": f"{14 + index % 4}.{index % 7}",
        "deviceModel": f"Model-{index % 31}",
        "referrer": "https://www.example.com/landing?utm_source=newsletter&utm_campaign=spring",
        "tags": ["early-adopter", "newsletter", f"cohort-{index % 12}", "mobile", "checkout"],
        "userAgent": "",
    }
    missing = size - len(json.dumps(attrs, separators=(",", ":")))
    if missing < 0:
        raise ValueError(f"attributes need at least {size - missing} bytes")
    attrs["userAgent"] = ("Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 " * 20)[:missing]
    return attrs


def _write_lines(path: Path, bodies: list[object]) -> Path:
    path.write_text("".join(json.dumps(b, separators=(",", ":")) + "\n" for b in bodies))
    return path


def _bulk_bodies(tag: str, users: int, count: int) -> list[object]:
    return [
        {"flagKey": FLAG_KEY, "userIdentifiers": [f"{tag}-{j}-user-{i}" for i in range(users)]}
        for j in range(count)
    ]


def _bulk_attribute_bodies(tag: str, users: int, count: int) -> list[object]:
    """As ``_bulk_bodies``, every user with attributes (those the conditions read and two more,
    about 130 bytes of JSON each)."""
    bodies = []
    for j, body in enumerate(_bulk_bodies(tag, users, count)):
        identifiers = body["userIdentifiers"]  # type: ignore[index]
        bodies.append({"flagKey": TARGETED_FLAG_KEY, "userIdentifiers": identifiers,
                       "attributes": {u: attributes(j * users + i, None)
                                      for i, u in enumerate(identifiers)}})  # fmt: skip
    return bodies


def _track_bodies(count: int) -> list[object]:
    """``count`` bodies of ``TRACK_EVENTS`` events as the SDK sends them: a name, a user of its
    own, a value for two events in three (a skewed amount) and the time it happened, up to ten
    minutes before now (within the service's 24 hours for as long as a benchmark runs)."""
    rng = random.Random(11)
    now = datetime.now(UTC)
    bodies = []
    for j in range(count):
        events: list[dict[str, object]] = []
        for i in range(TRACK_EVENTS):
            event: dict[str, object] = {
                "name": TRACK_NAMES[i % len(TRACK_NAMES)],
                "userIdentifier": f"t{j}-user-{i}",
            }
            if i % 3:
                event["value"] = round(rng.lognormvariate(3, 1), 2)
            at = now - timedelta(seconds=rng.uniform(0, 600))
            event["at"] = at.isoformat(timespec="microseconds").replace("+00:00", "Z")
            events.append(event)
        bodies.append({"events": events})
    return bodies


def check_targeted(url: str, api_key: str) -> None:
    """The targeted flag decides by its segment's conditions: a user who holds all five is
    matched by the SEGMENT rule, one whose e-mail fails ``MATCHES`` goes on to the percentage
    (so a figure is never measured against a server that ignores the conditions)."""
    for index, expected in ((1, True), (0, False)):
        answer = requests.post(
            f"{url}/v1/evaluate", headers={"Authorization": f"ApiKey {api_key}"}, timeout=10,
            json={"flagKey": TARGETED_FLAG_KEY, "userIdentifier": f"check-{index}",
                  "attributes": attributes(index)},
        )  # fmt: skip
        if answer.status_code != 200:
            raise RuntimeError(f"evaluate with attributes: {answer.status_code} {answer.text}")
        matched = answer.json().get("matchedRuleType")
        if (matched == "SEGMENT") is not expected:
            raise RuntimeError(
                f"the segment's conditions were not applied: attributes({index}) -> {matched}"
            )


def _single_evaluation_ids(url: str, api_key: str, count: int) -> list[str]:
    """Ids from single evaluations (each signed on its own, as SDK traffic makes them)."""

    def some(worker: int) -> list[str]:
        with requests.Session() as session:
            session.headers["Authorization"] = f"ApiKey {api_key}"
            return [
                session.post(
                    f"{url}/v1/evaluate",
                    json={"flagKey": FLAG_KEY, "userIdentifier": f"fb-{worker}-{i}"},
                    timeout=10,
                ).json()["evaluationId"]
                for i in range(count // 4)
            ]

    with ThreadPoolExecutor(4) as pool:
        return [i for ids in pool.map(some, range(4)) for i in ids]


def prepare(url: str, token: str, work_dir: Path, *, ids: int, bodies: int,
            targeted: bool = False) -> Workload:  # fmt: skip
    """Tenant, flag and the request bodies the wrk scripts send (``bodies`` of each kind); with
    ``targeted``, the flag on a segment of conditions and the attributes its scenarios send."""
    api_key, _ = create_tenant(url, token, targeted=targeted)
    time.sleep(CONFIG_PROPAGATION_S)  # every worker must know the new key and flag
    if targeted:
        check_targeted(url, api_key)
    evaluation_ids = _single_evaluation_ids(url, api_key, ids)
    rng = random.Random(7)
    feedback = []
    for _ in range(bodies):
        picked = rng.sample(evaluation_ids, min(500, len(evaluation_ids)))
        feedback.append({"feedbacks": [
            {"evaluationId": i, "result": rng.random() < 0.8, "latencyMs": round(rng.expovariate(0.01), 2)}
            for i in picked
        ]})  # fmt: skip
    ids_file = work_dir / "evaluation-ids.txt"
    ids_file.write_text("".join(i + "\n" for i in evaluation_ids))
    return Workload(
        api_key=api_key,
        flag_key=FLAG_KEY,
        bulk_1k=_write_lines(work_dir / "bulk-1k.jsonl", _bulk_bodies("b1k", 1000, bodies)),
        bulk_10k=_write_lines(work_dir / "bulk-10k.jsonl", _bulk_bodies("b10k", 10_000, bodies)),
        feedback_500=_write_lines(work_dir / "feedback-500.jsonl", feedback),
        track_500=_write_lines(work_dir / "track-500.jsonl", _track_bodies(bodies)),
        evaluation_ids=ids_file,
        **(_targeted_files(work_dir, bodies) if targeted else {}),
    )


def _targeted_files(work_dir: Path, bodies: int) -> dict[str, object]:
    return {
        "targeted_flag_key": TARGETED_FLAG_KEY,
        "attributes_1k": _write_lines(work_dir / "attributes-1k.jsonl",
                                      [attributes(i) for i in range(ATTRIBUTE_VARIANTS)]),
        "bulk_10k_attributes": _write_lines(work_dir / "bulk-10k-attributes.jsonl",
                                            _bulk_attribute_bodies("a10k", 10_000, bodies)),
    }  # fmt: skip
