"""Redaction of anything that looks like an API key, before it reaches the database.

Every text and blob the writer stores passes through one `Redactor`, so nothing that looks
like a key is stored, and therefore nothing is exported or printed from the store either.
Two kinds of match: known key shapes (``sk-...``, ``AKIA...``, ``ghp_...``, ...) and the
literal values of secret-looking environment variables (``*_API_KEY``, ``*_TOKEN``, ...),
whatever their shape.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

MASK = "[REDACTED]"

# Known key shapes.
_SHAPES = re.compile(
    r"sk-[A-Za-z0-9_\-]{16,}"  # OpenAI (sk-, sk-proj-), Anthropic (sk-ant-)
    r"|(?:AKIA|ASIA)[0-9A-Z]{16}"  # AWS access key ids
    r"|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}"  # GitHub
    r"|xox[abprs]-[A-Za-z0-9\-]{10,}"  # Slack
    r"|AIza[0-9A-Za-z_\-]{35}"  # Google
    r"|hf_[A-Za-z0-9]{30,}"  # Hugging Face
    r"|gsk_[A-Za-z0-9]{30,}"  # Groq
)

# `api_key = "..."`, `"token": "..."`, `Authorization: Bearer ...`: the value is masked.
_ASSIGNED = re.compile(
    r"(?i)(\b[\w\-]*(?:api[_\-]?key|secret|token|passw(?:or)?d|credential)[\w\-]*[\"']?"
    r"\s*[:=]\s*[\"'])(?=[^\"'\s]*\d)[^\"'\s]{12,}"
    r"|(\bbearer\s+)[A-Za-z0-9._~+/\-]{20,}=*"
)
# Lower-case literals, one of which every match of _SHAPES or _ASSIGNED contains.
_GATE = re.compile(
    r"sk-|akia|asia|gh[pousr]_|github_pat_|xox|aiza|hf_|gsk_"
    r"|key|secret|token|passw|credential|bearer"
)

_SECRET_ENV_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH", re.IGNORECASE)
_MIN_LITERAL = 8


@dataclass(frozen=True)
class Redactor:
    """Masks key-shaped text and the given literal secret values."""

    literals: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        short = [v for v in self.literals if len(v) < _MIN_LITERAL]
        if short:
            raise ValueError(
                f"{len(short)} secret literal(s) shorter than {_MIN_LITERAL} characters: "
                "masking them would corrupt ordinary text; pass longer values only"
            )

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> Redactor:
        """Literal values of secret-looking variables, plus any key-shaped value."""
        env = os.environ if environ is None else environ
        values = {
            value
            for name, value in env.items()
            if _SHAPES.fullmatch(value) or (_SECRET_ENV_NAME.search(name) and _opaque(value))
        }
        # Longest first, so that a value containing another is masked whole.
        return cls(tuple(sorted(values, key=len, reverse=True)))

    def text(self, value: str) -> str:
        if len(value) < _MIN_LITERAL:  # too short to hold any key (the fast path)
            return value
        for literal in self.literals:
            if literal in value:
                value = value.replace(literal, MASK)
        if _GATE.search(value.lower()):  # cheap: only then run the slower patterns
            value = _ASSIGNED.sub(_keep_name, _SHAPES.sub(MASK, value))
        return value

    def blob(self, value: bytes) -> bytes:
        """Raw artifacts: decoded as latin-1 (lossless), masked, encoded back."""
        return self.text(value.decode("latin-1")).encode("latin-1")

    def found(self, value: str) -> bool:
        """Whether `value` holds anything this redactor would mask."""
        return self.text(value) != value


def _opaque(value: str) -> bool:
    """A value that could be a credential: long, one word, with a digit, not a path."""
    return (
        len(value) >= _MIN_LITERAL
        and not any(c.isspace() for c in value)
        and any(c.isdigit() for c in value)
        and not value.startswith(("/", "~"))
    )


def _keep_name(match: re.Match[str]) -> str:
    return (match.group(1) or match.group(2)) + MASK
