"""Client traffic for tests that kill or starve a real server: remember only what was
acknowledged (a 200 evaluation, a 204 feedback)."""

from __future__ import annotations

import threading
import time

import requests


def traffic(
    url: str,
    key: str,
    stop: threading.Event,
    acked_evals: list[str],
    acked_feedback: list[str],
    refused: list[tuple[str, int]] | None = None,
) -> None:
    """Evaluate (single and bulk) and report feedback until stopped. Answers other than
    200/204 go to ``refused`` as ``(endpoint, status)`` when given."""
    session = requests.Session()
    session.headers["Authorization"] = f"ApiKey {key}"
    i = 0
    while not stop.is_set():
        i += 1
        try:
            if i % 5 == 0:
                bulk = session.post(
                    f"{url}/v1/evaluate/bulk",
                    json={"flagKey": "f", "userIdentifiers": [f"b{i}-{j}" for j in range(20)]},
                    timeout=2,
                )
                if bulk.status_code == 200:
                    acked_evals.extend(entry["evaluationId"] for entry in bulk.json().values())
                elif refused is not None:
                    refused.append(("bulk", bulk.status_code))
                continue
            answer = session.post(
                f"{url}/v1/evaluate", json={"flagKey": "f", "userIdentifier": f"u{i}"}, timeout=2
            )
            if answer.status_code != 200:
                if refused is not None:
                    refused.append(("evaluate", answer.status_code))
                continue
            evaluation_id = answer.json()["evaluationId"]
            acked_evals.append(evaluation_id)
            feedback = session.post(
                f"{url}/v1/feedback/report",
                json={"evaluationId": evaluation_id, "result": True},
                timeout=2,
            )
            if feedback.status_code == 204:
                acked_feedback.append(evaluation_id)
            elif refused is not None:
                refused.append(("feedback", feedback.status_code))
        except requests.RequestException:
            time.sleep(0.01)
