"""Fixtures of the pipeline tests: a real S3 server (moto's) for the object-storage tests."""

from __future__ import annotations

import socket
import uuid

import pytest


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# one server for the session: fsspec keeps a filesystem per set of arguments, so one made while a
# server of another module ran would still point at its (stopped) endpoint
@pytest.fixture(scope="session")
def s3_endpoint():
    from moto.server import ThreadedMotoServer

    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    yield f"http://127.0.0.1:{port}"
    server.stop()


@pytest.fixture
def s3(s3_endpoint, monkeypatch):
    """(filesystem, a fresh bucket) with the S3 environment a user would set."""
    import fsspec

    for key, value in {
        "AWS_ENDPOINT_URL": s3_endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_EC2_METADATA_DISABLED": "true",
    }.items():
        monkeypatch.setenv(key, value)
    fs = fsspec.filesystem("s3", skip_instance_cache=True)
    bucket = f"b-{uuid.uuid4().hex[:12]}"
    fs.mkdir(bucket)
    return fs, bucket
