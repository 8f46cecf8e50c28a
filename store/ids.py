"""Identifiers and timestamps for records: content hashes where a row has a natural key."""

from __future__ import annotations

import hashlib
import uuid
from datetime import UTC, datetime


def content_id(*parts: object) -> str:
    """A stable id from the parts of a natural key: a retried record gets the same id."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(str(part).encode() + b"\0")
    return digest.hexdigest()[:16]


def candidate_id(source: str, platform: str) -> str:
    """EvalResult.candidate_hash: the normalized source and platform; raw text if unparsable."""
    from kforge_search.problem import source_hash

    try:
        return source_hash(source, platform)
    except SyntaxError:
        return content_id("unparsable", source, platform)


def new_id() -> str:
    """An id for a row without a natural key (a run, an LLM call); set once, when created."""
    return uuid.uuid4().hex[:16]


def utcnow() -> datetime:
    """Now in UTC, without tzinfo (the store keeps naive UTC timestamps)."""
    return datetime.now(UTC).replace(tzinfo=None)
