"""Where the event lake lives: a local folder or S3-compatible object storage.

The one place that turns a location and ``S3Options`` into a pyarrow filesystem. pyarrow is
imported inside the functions, so that importing this module costs nothing (API workers and a
pipeline over a local lake never load it for this).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from api.settings import S3Options

if TYPE_CHECKING:
    import pyarrow.fs as pafs

S3_SCHEME = "s3"
S3_ATTEMPTS = 3
"""Attempts per request inside the AWS SDK (its own short backoff); the sealer's backoff
between passes (``api.eventlog.sealer``) handles longer outages."""


def is_remote(location: str) -> bool:
    """Whether ``location`` is a URI other than ``file://`` (object storage)."""
    return "://" in location and not location.startswith("file://")


def is_object_store(location: str) -> bool:
    return urlparse(location).scheme == S3_SCHEME


def s3_filesystem(options: S3Options) -> pafs.S3FileSystem:
    """A pyarrow S3 filesystem from ``options`` (see ``S3Options``)."""
    import pyarrow.fs as pafs

    endpoint: dict[str, str] = {}
    if options.endpoint_url:
        parsed = urlparse(options.endpoint_url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise ValueError(
                f"AWS_ENDPOINT_URL must look like http(s)://host[:port], not "
                f"{options.endpoint_url!r}"
            )
        endpoint = {"endpoint_override": parsed.netloc, "scheme": parsed.scheme}
    return pafs.S3FileSystem(
        access_key=options.access_key_id,
        secret_key=options.secret_access_key,
        session_token=options.session_token,
        region=options.region,
        connect_timeout=options.connect_timeout_s,
        request_timeout=options.request_timeout_s,
        retry_strategy=pafs.AwsStandardS3RetryStrategy(max_attempts=S3_ATTEMPTS),
        **endpoint,
    )


def filesystem_for(location: str, s3: S3Options | None = None) -> tuple[pafs.FileSystem, str]:
    """A pyarrow filesystem and the base path of ``location`` in it.

    ``s3://bucket/prefix`` uses ``s3`` (settings from the ``AWS_*`` variables) when given;
    other URIs (``file://``, ``s3://`` without options, ``gs://`` ...) go to pyarrow's own
    ``from_uri``; anything else is a local path.
    """
    import pyarrow.fs as pafs

    if is_object_store(location) and s3 is not None:
        parsed = urlparse(location)
        if not parsed.netloc:
            raise ValueError(f"events URI {location!r} names no bucket")
        base = f"{parsed.netloc}/{parsed.path.strip('/')}".rstrip("/")
        return s3_filesystem(s3), base
    if "://" in location:
        return pafs.FileSystem.from_uri(location)
    return pafs.LocalFileSystem(), str(Path(location).resolve())


class LakeUnavailable(OSError):
    """The object store did not take a file (unreachable, refused, timed out)."""
