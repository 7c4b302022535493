"""Sealing into object storage, with a fake bucket: our naming, idempotency and backoff alone.

The real store (SeaweedFS) is exercised end to end in ``tests/integration/test_s3_lake.py``.
"""

from __future__ import annotations

import io
import threading
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from api.backends import sink_factory
from api.eventlog.frames import TYPE_CODES, encode_frame
from api.eventlog.schema import EVALUATION, FEEDBACK
from api.eventlog.sealer import Backoff, Sealer
from api.eventlog.sealing import seal_segment
from api.eventlog.segments import SegmentNamer, create_segment
from api.eventlog.sinks import ObjectStoreSink
from api.infra.host_identity import host_id
from api.observability.metrics import Metrics
from api.settings import Settings
from tests.eventlog.support import LAST_US_OF_DAY, evaluation, feedback

BASE = "bucket/events"


class FakeBucket:
    """Objects by name; each PUT lands whole when its stream closes cleanly. ``down`` makes
    the next PUTs fail as an unreachable store does."""

    def __init__(self) -> None:
        self.objects: dict[str, bytes] = {}
        self.puts = 0
        self.down = False

    def open_output_stream(self, path: str) -> _Put:
        if self.down:
            raise OSError(f"When initiating upload of {path}: connection refused")
        return _Put(self, path)


class _Put(io.BytesIO):
    def __init__(self, bucket: FakeBucket, path: str):
        super().__init__()
        self._bucket, self._path = bucket, path

    def __exit__(self, exc_type, *rest) -> None:  # noqa: ANN001
        if exc_type is None:
            self._bucket.objects[self._path] = self.getvalue()
            self._bucket.puts += 1
        super().__exit__(exc_type, *rest)


def _segment(wal: Path, count: int = 20):
    """An owned, written segment: evaluations on two UTC dates and feedback."""
    wal.mkdir(parents=True, exist_ok=True)
    segment = create_segment(wal, SegmentNamer(time.time))
    for n in range(count):
        segment.append(
            encode_frame(TYPE_CODES[EVALUATION], [evaluation(n, LAST_US_OF_DAY + n % 2)])
        )
    segment.append(encode_frame(TYPE_CODES[FEEDBACK], [feedback(n) for n in range(5)]))
    return segment


def _ids(bucket: FakeBucket, event_type: str) -> list[str]:
    tables = [
        pq.read_table(pa.BufferReader(data))
        for name, data in bucket.objects.items()
        if f"/event_type={event_type}/" in name
    ]
    return [i for t in tables for i in t.column("evaluation_id").to_pylist()]


def test_objects_are_named_after_the_host_and_the_segment(tmp_path: Path) -> None:
    bucket, host = FakeBucket(), host_id(tmp_path / "host-id")
    segment = _segment(tmp_path / "wal")
    seal_segment(segment.path, ObjectStoreSink(bucket, BASE, host))
    assert sorted(bucket.objects) == [
        f"{BASE}/event_type=evaluation/date=2024-02-29/{host}-{segment.stem}.parquet",
        f"{BASE}/event_type=evaluation/date=2024-03-01/{host}-{segment.stem}.parquet",
        f"{BASE}/event_type=feedback/date=2024-02-29/{host}-{segment.stem}.parquet",
    ]
    assert bucket.puts == 3  # one PUT each: no temporary object, no copy


def test_sealing_again_after_a_crash_puts_the_same_bytes_under_the_same_names(
    tmp_path: Path,
) -> None:
    bucket, host = FakeBucket(), host_id(tmp_path / "host-id")
    segment = _segment(tmp_path / "wal")
    seal_segment(segment.path, ObjectStoreSink(bucket, BASE, host))
    first = dict(bucket.objects)
    # Killed after the uploads, before the segment was deleted: the next process (same host,
    # so the same id from the data directory) seals it again.
    again = ObjectStoreSink(bucket, BASE, host_id(tmp_path / "host-id"))
    seal_segment(segment.path, again)
    assert bucket.objects == first
    assert sorted(_ids(bucket, EVALUATION)) == sorted(f"e-{n}" for n in range(20))
    assert len(_ids(bucket, FEEDBACK)) == 5


def test_two_hosts_never_write_the_same_name(tmp_path: Path) -> None:
    one, two = host_id(tmp_path / "a" / "host-id"), host_id(tmp_path / "b" / "host-id")
    assert one != two
    bucket = FakeBucket()
    segment = _segment(tmp_path / "wal")  # the same segment name on both: the worst case
    seal_segment(segment.path, ObjectStoreSink(bucket, BASE, one))
    seal_segment(segment.path, ObjectStoreSink(bucket, BASE, two))
    assert len(bucket.objects) == 6


def test_the_host_id_is_made_once_and_kept(tmp_path: Path) -> None:
    path = tmp_path / "data" / "host-id"
    seen: list[str] = []
    threads = [threading.Thread(target=lambda: seen.append(host_id(path))) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(seen)) == 1 and len(seen[0]) == 32
    assert host_id(path) == seen[0] == path.read_text().strip()
    assert [p.name for p in path.parent.iterdir()] == ["host-id"]


def test_the_s3_sink_takes_the_host_id_from_the_data_directory(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, events_uri="s3://bucket/some/prefix")
    sink = sink_factory(settings)()
    assert isinstance(sink, ObjectStoreSink)
    assert sink.base == "bucket/some/prefix"
    assert sink.host == host_id(settings.host_id_path)


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _value(metrics: Metrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def test_while_the_store_is_down_segments_wait_and_sealing_backs_off(tmp_path: Path) -> None:
    bucket, clock, metrics = FakeBucket(), FakeClock(), Metrics()
    wal = tmp_path / "wal"
    sealer = Sealer(
        wal,
        lambda: ObjectStoreSink(bucket, BASE, "h"),
        metrics=metrics,
        backoff=Backoff(base_s=1.0, cap_s=4.0, clock=clock, jitter=lambda: 0.5),
    )
    bucket.down = True
    sealer.seal_owned(_segment(wal))
    assert len(list(wal.glob("*.wal"))) == 1  # kept: nothing acknowledged is lost
    failures = "flagsight_event_seal_failures_total"
    assert _value(metrics, failures, reason="store_unavailable") == 1
    assert _value(metrics, "flagsight_event_lake_unreachable") == 1

    sealer.seal_owned(_segment(wal))  # backing off: not even tried
    sealer.recover_orphans()
    assert _value(metrics, failures, reason="store_unavailable") == 1
    assert _value(metrics, "flagsight_event_log_backlog_segments") == 2
    assert _value(metrics, "flagsight_event_log_backlog_bytes") > 0

    delays = []
    for _ in range(4):  # each failed retry doubles the wait, up to the cap
        before = clock.now
        while not sealer.backoff.ready():
            clock.now += 0.25
        delays.append(clock.now - before)
        sealer.recover_orphans()
    assert delays == [1.0, 2.0, 4.0, 4.0]
    assert _value(metrics, failures, reason="store_unavailable") == 5

    bucket.down = False
    clock.now += 5
    sealer.recover_orphans()
    assert list(wal.glob("*.wal")) == []
    assert len(_ids(bucket, EVALUATION)) == 40 and len(set(_ids(bucket, EVALUATION))) == 20
    assert _value(metrics, "flagsight_event_lake_unreachable") == 0
    assert _value(metrics, "flagsight_event_log_backlog_segments") == 0
    assert sealer.backoff.failures == 0


def test_settings_read_the_standard_aws_variables() -> None:
    settings = Settings.from_env(
        {
            "FLAGSIGHT_EVENTS_URI": "s3://lake/events",
            "AWS_ACCESS_KEY_ID": "id",
            "AWS_SECRET_ACCESS_KEY": "s3cr3t-value",
            "AWS_REGION": "eu-west-3",
            "AWS_ENDPOINT_URL": "http://127.0.0.1:8333",
        }
    )
    s3 = settings.s3
    assert (s3.access_key_id, s3.secret_access_key, s3.region, s3.endpoint_url) == (
        "id", "s3cr3t-value", "eu-west-3", "http://127.0.0.1:8333",
    )  # fmt: skip
    assert s3.secret_variable == "AWS_SECRET_ACCESS_KEY"
    assert "s3cr3t-value" not in repr(settings)


@pytest.mark.parametrize("endpoint", ["127.0.0.1:8333", "ftp://host", "http://"])
def test_an_endpoint_without_an_http_scheme_is_refused(endpoint: str) -> None:
    from api.infra.objectstore import s3_filesystem
    from api.settings import S3Options

    with pytest.raises(ValueError, match="AWS_ENDPOINT_URL"):
        s3_filesystem(S3Options(endpoint_url=endpoint))
