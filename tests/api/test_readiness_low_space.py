"""/readyz while the event log's disk is nearly full but the log is otherwise fine: not ready,
with a message that says what will happen (writes may soon be refused) rather than what is not
happening yet, and feedback still answers 204 meanwhile. The disk is made to look nearly full
by answering ``os.statvfs`` for ``wal/`` only, so the test does not depend on a real disk."""

from __future__ import annotations

import os

import pytest

from api.serving.services import Services
from tests.support.admin import Admin, Tenant

BLOCK = 4096
FREE_BLOCKS = 100  # 409,600 bytes: under the 1 MiB /readyz keeps in reserve


def test_low_space_makes_readyz_say_writes_may_soon_be_refused_while_feedback_answers_204(
    client, admin: Admin, tenant: Tenant, services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    wal_dir = services.settings.wal_dir
    real_statvfs = os.statvfs

    def statvfs(path: os.PathLike[str] | str | int) -> os.statvfs_result:
        answer = real_statvfs(path)
        if isinstance(path, int) or os.fspath(path) != os.fspath(wal_dir):
            return answer
        fields = list(answer)  # bsize, frsize, blocks, bfree, bavail, files, ffree, ...
        fields[1], fields[3], fields[4] = BLOCK, FREE_BLOCKS, FREE_BLOCKS
        return os.statvfs_result(fields)

    admin.flag(tenant.environment_id, "f", [{"type": "STATIC"}])
    headers = {"Authorization": f"ApiKey {tenant.api_key}"}
    assert client.simulate_get("/readyz").status_code == 200  # ready before, on the real disk

    monkeypatch.setattr(os, "statvfs", statvfs)
    ready = client.simulate_get("/readyz")
    assert ready.status_code == 503
    assert ready.json == {
        "status": "not ready",
        "checks": {
            "controlPlane": "ok",
            "eventLog": (
                f"error: 409600 bytes free under {wal_dir}, under the 1048576 kept in reserve:"
                " the event log may soon refuse writes (feedback would then answer 503)"
            ),
        },
    }
    evaluated = client.simulate_post(
        "/v1/evaluate", json={"flagKey": "f", "userIdentifier": "u"}, headers=headers
    )
    assert (evaluated.status_code, evaluated.json["value"]) == (200, True)
    feedback = client.simulate_post(
        "/v1/feedback/report",
        json={"evaluationId": evaluated.json["evaluationId"], "result": True},
        headers=headers,
    )
    assert (feedback.status_code, feedback.content) == (204, b"")  # what the message promises

    monkeypatch.setattr(os, "statvfs", real_statvfs)
    assert client.simulate_get("/readyz").json["status"] == "ready"  # room again: ready again
