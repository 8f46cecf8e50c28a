"""A local HTTP server that speaks the OpenAI Chat Completions and Anthropic Messages wire
protocols with scripted replies, for the real SDK clients to talk to (no LLM is reachable
from these machines). Each request takes the next step of the script:

    Say(text, tokens_in, tokens_out)   a normal reply in the protocol of the path asked
    Say(..., cut=True)                 a reply cut at the output limit (finish_reason length,
                                       stop_reason max_tokens)
    Status(code, retry_after)          an error status with the protocol's error body
    Slow(seconds, then)                wait, then do `then` (for client timeouts)
    Raw(body)                          a malformed body with status 200

Requests (path, JSON body, whether an Authorization / x-api-key header came) are recorded.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Say:
    text: str
    tokens_in: int = 100
    tokens_out: int = 50
    cut: bool = False


@dataclass(frozen=True)
class Status:
    code: int
    retry_after: str | None = "0"


@dataclass(frozen=True)
class Slow:
    seconds: float
    then: Any = None


@dataclass(frozen=True)
class Raw:
    body: str


@dataclass
class Seen:
    path: str
    body: dict[str, Any]
    key: str = field(repr=False, default="")


def _openai(text: str, model: str, tin: int, tout: int, cut: bool) -> dict[str, Any]:
    return {
        "id": "chatcmpl-test", "object": "chat.completion", "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "finish_reason": "length" if cut else "stop",
                     "message": {"role": "assistant", "content": text}}],
        "usage": {"prompt_tokens": tin, "completion_tokens": tout, "total_tokens": tin + tout},
    }  # fmt: skip


def _anthropic(text: str, model: str, tin: int, tout: int, cut: bool) -> dict[str, Any]:
    return {
        "id": "msg_test", "type": "message", "role": "assistant", "model": model,
        "content": [{"type": "text", "text": text}],
        "stop_reason": "max_tokens" if cut else "end_turn",
        "stop_sequence": None, "usage": {"input_tokens": tin, "output_tokens": tout},
    }  # fmt: skip


def _error_body(path: str, code: int) -> dict[str, Any]:
    if path.endswith("/messages"):
        kind = "rate_limit_error" if code == 429 else "api_error"
        return {"type": "error", "error": {"type": kind, "message": f"scripted {code}"}}
    return {"error": {"message": f"scripted {code}", "type": "server_error", "code": code}}


class ScriptedLLM:
    def __init__(self, *script: Any):
        self.script = list(script)
        self.seen: list[Seen] = []
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                key = self.headers.get("x-api-key") or self.headers.get("authorization", "")
                with owner._lock:
                    owner.seen.append(Seen(self.path, body, key))
                    step = owner.script.pop(0) if owner.script else Status(500, None)
                owner._answer(self, step, body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def _answer(self, h: BaseHTTPRequestHandler, step: Any, body: dict[str, Any]) -> None:
        if isinstance(step, Slow):
            time.sleep(step.seconds)
            step = step.then
            if step is None:
                return
        if isinstance(step, Say):
            make = _anthropic if h.path.endswith("/messages") else _openai
            self._send(h, 200, json.dumps(make(step.text, body.get("model", "m"),
                                               step.tokens_in, step.tokens_out,
                                               step.cut)))  # fmt: skip
        elif isinstance(step, Status):
            extra = {"retry-after": step.retry_after} if step.retry_after is not None else {}
            self._send(h, step.code, json.dumps(_error_body(h.path, step.code)), extra)
        elif isinstance(step, Raw):
            self._send(h, 200, step.body)

    @staticmethod
    def _send(h: BaseHTTPRequestHandler, code: int, text: str,
              headers: dict[str, str] | None = None) -> None:  # fmt: skip
        data = text.encode()
        try:
            h.send_response(code)
            h.send_header("content-type", "application/json")
            h.send_header("content-length", str(len(data)))
            for k, v in (headers or {}).items():
                h.send_header(k, v)
            h.end_headers()
            h.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (a timeout)
            pass

    def __enter__(self) -> ScriptedLLM:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
