"""Any S3-compatible store (AWS, MinIO, moto) through boto3 presigned URLs.

A presigned PUT URL signs the Content-Type, and a Content-Encoding other than identity, so S3
refuses an upload without them. What S3 can't do: refuse a second PUT to the same URL, or one
after the task is resolved, or one that adds a Content-Encoding to an identity URL. Upload URLs
therefore live only S3_PUT_URL_TTL_MS (S3 checks the expiry when a PUT starts).
"""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import parse_qs, urlsplit

import boto3
from botocore.config import Config

from taskyard.model.artifacts import IDENTITY, S3_PUT_URL_TTL_MS, UNDECLARED
from taskyard.model.errors import ConfigError
from taskyard.model.types import Clock


class S3Store:
    """Blobs in one bucket under `<taskId>/<runId>/<name>`; every URL is presigned and expiring."""

    put_url_ttl_ms = S3_PUT_URL_TTL_MS

    def __init__(
        self, bucket: str, *, endpoint: str | None, region: str, clock: Clock, max_bytes: int = 1024**3
    ) -> None:
        self.bucket = bucket
        self.max_bytes = max_bytes
        self._clock = clock
        # Signature version 4 signs the headers a URL is made for; SigV2, which boto3 presigns with
        # at some endpoints, leaves Content-Encoding out. AWS, MinIO and moto all speak v4.
        config = Config(signature_version="s3v4")
        self._client: Any = boto3.client("s3", endpoint_url=endpoint, region_name=region, config=config)

    def _ttl(self, expires: int) -> int:
        return max(1, (expires - self._clock()) // 1000)

    def put_url(self, key: str, *, content_type: str, content_encoding: str, expires: int, token: str) -> str:
        del token  # S3 can't check what the queue knows of the upload
        params = {"Bucket": self.bucket, "Key": key, "ContentType": content_type}
        if content_encoding not in (UNDECLARED, IDENTITY):
            params["ContentEncoding"] = content_encoding
        return str(
            self._client.generate_presigned_url("put_object", Params=params, ExpiresIn=self._ttl(expires))
        )

    def get_url(self, key: str, expires: int) -> str:
        params = {"Bucket": self.bucket, "Key": key}
        return str(
            self._client.generate_presigned_url("get_object", Params=params, ExpiresIn=self._ttl(expires))
        )

    async def delete(self, keys: list[str]) -> None:
        for start in range(0, len(keys), 1000):  # S3's limit per DeleteObjects call
            batch = {"Objects": [{"Key": k} for k in keys[start : start + 1000]], "Quiet": True}
            await asyncio.to_thread(self._client.delete_objects, Bucket=self.bucket, Delete=batch)


def from_url(url: str, clock: Clock, max_bytes: int = 1024**3) -> S3Store:
    """`s3://bucket?endpoint=http://host:port&region=us-east-1` (credentials from boto3's usual places)."""
    parts = urlsplit(url)
    if not parts.netloc:
        raise ConfigError("artifacts", url, "an s3:// URL names its bucket: s3://bucket?endpoint=...")
    query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
    return S3Store(
        parts.netloc,
        endpoint=query.get("endpoint"),
        region=query.get("region", "us-east-1"),
        clock=clock,
        max_bytes=max_bytes,
    )
