"""The benchmark's tenant, flag and request bodies, set up through the public and admin APIs."""

from __future__ import annotations

import json
import random
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import requests

FLAG_KEY = "checkout-redesign"
SEGMENT_KEY = "beta-testers"
RULES = [
    {"type": "SEGMENT", "segment": SEGMENT_KEY, "value": True},
    {"type": "PERCENTAGE", "percentage": 50, "value": True},
]
"""A segment first, then a 50% rollout: most users are bucketed (a murmur3 hash each)."""
CONFIG_PROPAGATION_S = 1.5
"""The contract: an admin change reaches every worker within one second."""
LIMIT = 10**15
"""Metering is exact and on every request, but the benchmark must never hit the threshold."""


@dataclass(frozen=True)
class Workload:
    api_key: str
    flag_key: str
    bulk_1k: Path
    bulk_10k: Path
    feedback_500: Path
    evaluation_ids: Path


def _admin(url: str, token: str, method: str, path: str, body: object) -> dict:
    answer = requests.request(
        method, f"{url}/admin/v1{path}", json=body,
        headers={"Authorization": f"Bearer {token}"}, timeout=30,
    )  # fmt: skip
    if answer.status_code not in (200, 201):
        raise RuntimeError(f"{method} {path}: {answer.status_code} {answer.text[:500]}")
    return answer.json()


def create_tenant(url: str, token: str) -> tuple[str, str]:
    """An enterprise organization, its production environment (insights on), a key, the flag."""
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
    return key["key"], env["id"]


def _write_lines(path: Path, bodies: list[object]) -> Path:
    path.write_text("".join(json.dumps(b, separators=(",", ":")) + "\n" for b in bodies))
    return path


def _bulk_bodies(tag: str, users: int, count: int) -> list[object]:
    return [
        {"flagKey": FLAG_KEY, "userIdentifiers": [f"{tag}-{j}-user-{i}" for i in range(users)]}
        for j in range(count)
    ]


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


def prepare(url: str, token: str, work_dir: Path, *, ids: int, bodies: int) -> Workload:
    """Tenant, flag and the request bodies the wrk scripts send (``bodies`` of each kind)."""
    api_key, _ = create_tenant(url, token)
    time.sleep(CONFIG_PROPAGATION_S)  # every worker must know the new key and flag
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
        evaluation_ids=ids_file,
    )
