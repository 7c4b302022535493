"""Demo traffic for ``make run``: evaluations of the demo flags and their outcomes.

The "new-checkout" experience succeeds a little more often when on than off, so the insights
pages show a real difference once enough feedback has arrived.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Sequence

import requests

log = logging.getLogger("flagsight.demo")

DEMO_FLAGS = ("new-checkout", "beta-banner", "dark-mode")
SUCCESS_PROBABILITY = {("new-checkout", True): 0.95, ("new-checkout", False): 0.90}
FEEDBACK_SHARE = 0.85  # not every evaluation reports back: coverage below 100 %
DEMO_USERS = 1_000_000
"""Users are drawn from this many, so that nearly every evaluation is a new user, as on a
service with a day's worth of visitors: release health counts each user once per step, and a
guarded rollout of the demo flag needs new users arriving to show its steps safe (with 5,000,
a 10 % step never had more than 500 treatment users)."""


def run_demo_traffic(
    base_urls: Sequence[str],
    api_key: str,
    *,
    rate: float = 50.0,
    duration_s: float | None = None,
    seed: int | None = None,
) -> int:
    """Send traffic until ``duration_s`` passes (or forever); returns evaluations sent.

    Each evaluation goes to one of ``base_urls`` at random and its outcomes, batched, to
    another: on a cluster, every host serves and takes feedback for every other's answers."""
    rng = random.Random(seed)
    session = requests.Session()
    session.headers["Authorization"] = f"ApiKey {api_key}"
    pending: list[dict[str, object]] = []
    sent = 0
    started = last_flush = time.monotonic()
    while duration_s is None or time.monotonic() - started < duration_s:
        flag = rng.choice(DEMO_FLAGS)
        user = f"user-{rng.randrange(DEMO_USERS)}"
        try:
            answer = session.post(
                f"{rng.choice(base_urls)}/v1/evaluate",
                json={"flagKey": flag, "userIdentifier": user, "sdk": "flagsight-demo"},
                timeout=2,
            ).json()
            sent += 1
            if rng.random() < FEEDBACK_SHARE:
                success = rng.random() < SUCCESS_PROBABILITY.get((flag, answer["value"]), 0.97)
                pending.append(
                    {
                        "evaluationId": answer["evaluationId"],
                        "result": success,
                        "latencyMs": round(rng.uniform(40, 900), 1),
                    }
                )
            if pending and (len(pending) >= 500 or time.monotonic() - last_flush > 1):
                session.post(
                    f"{rng.choice(base_urls)}/v1/feedback/bulk",
                    json={"feedbacks": pending},
                    timeout=5,
                )
                pending, last_flush = [], time.monotonic()
        except (requests.RequestException, ValueError, KeyError) as exc:
            log.warning("demo request failed", extra={"reason": str(exc)})
            time.sleep(1)
        time.sleep(max(0.0, 1.0 / rate))
    if pending:
        session.post(
            f"{rng.choice(base_urls)}/v1/feedback/bulk", json={"feedbacks": pending}, timeout=5
        )
    return sent
