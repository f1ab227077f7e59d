"""The optional chat model: a client of any OpenAI-compatible ``/v1/chat/completions`` endpoint.

Ollama, LM Studio, vLLM, llama.cpp's server and the hosted APIs all speak the same request and answer JSON.
The client asks in JSON mode (``response_format: {"type": "json_object"}``, ``temperature`` 0) and returns
the answer's content parsed as JSON; a content wrapped in a fenced ```json block (what some local models do
even in JSON mode) is unwrapped first.

Failures are one error, :class:`~m3.errors.LlmError` (code ``llm_error``): the endpoint unreachable or timing
out after its retries, a refusal, or an answer that is not JSON. Connection errors, timeouts, 429 and 5xx are
retried (``retries`` times, exponential backoff, a ``Retry-After`` honoured up to :data:`MAX_RETRY_AFTER_S`);
any other 4xx is not, since asking again cannot change the answer. The key is sent as a bearer token and never
appears in a log line or an error.

A model is optional (docs/cognitive-loop.md "A model is optional"): :func:`chat_model_from_config` gives None
when ``llm.url`` is empty, and every pass then uses its deterministic rules.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx2 as httpx

from m3.config import Config
from m3.embed.http import error_message
from m3.errors import ConfigError, LlmError

log = logging.getLogger(__name__)

#: The longest ``Retry-After`` honoured; a server asking for more is waited on this long only.
MAX_RETRY_AFTER_S = 30.0
#: The first backoff; each retry doubles it, up to :data:`MAX_BACKOFF_S`.
BACKOFF_S = 0.5
MAX_BACKOFF_S = 8.0
#: Statuses worth asking again: rate limited, or the server failed.
RETRIED_STATUSES = frozenset({429}) | frozenset(range(500, 600))

_FENCE = re.compile(r"^\s*```[a-zA-Z0-9_-]{0,20}[ \t]*\n(?P<body>.*?)\n?```\s*$", re.DOTALL)


def chat_url(url: str) -> str:
    """``{url}/chat/completions`` for the API base ``url`` (a trailing ``/`` or ``/chat/completions`` is
    dropped first).

    Raises:
        ConfigError: ``url`` is not an http(s) URL.
    """
    base = url.strip().rstrip("/").removesuffix("/chat/completions")
    if not re.match(r"^https?://[^/\s]+", base):
        raise ConfigError(f"llm.url {url!r} is not an http(s) URL",
                          hint="Give the endpoint's API base, e.g. http://127.0.0.1:11434/v1 for Ollama.")
    return base + "/chat/completions"


def parse_content(content: Any) -> Any:
    """The JSON value of a message's ``content``; a fenced ```json block is unwrapped first.

    Raises:
        ValueError: ``content`` is not a string holding JSON.
    """
    if not isinstance(content, str):
        raise ValueError(f"the message content is {type(content).__name__}, not text")
    fenced = _FENCE.match(content)
    return json.loads(fenced.group("body") if fenced else content)


class OpenAIChatModel:
    """A :class:`~m3.cognition.passes.ChatModel` over an OpenAI-compatible chat completions endpoint.

    Args:
        url: The API base (``http://127.0.0.1:11434/v1``); requests go to ``{url}/chat/completions``.
        model: The model name sent with every request.
        key: Bearer key, sent as ``Authorization`` when given.
        timeout_s: Longest wait for one answer (connecting is bounded by a third of it, at most 5 s).
        retries: How many times a failed call is asked again (connection errors, timeouts, 429, 5xx).
        sleep: Waits between attempts (injectable so that tests see the backoff without waiting it).

    Thread safety: one instance may be used from several threads (httpx's pool is shared); :attr:`calls`
    counts the HTTP requests made.
    """

    def __init__(self, url: str, model: str, *, key: str = "", timeout_s: float = 60.0, retries: int = 2,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        if not model:
            raise ConfigError("llm.url is set but llm.model is empty",
                              hint="Set llm.model to a model the endpoint lists at /v1/models.")
        self._url = chat_url(url)
        self._model = model
        self._retries = max(0, retries)
        self._sleep = sleep
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._client = httpx.Client(headers=headers,
                                    timeout=httpx.Timeout(timeout_s, connect=min(5.0, timeout_s / 3)))
        self._lock = threading.Lock()
        self.calls = 0

    @property
    def url(self) -> str:
        """Where the requests go (``…/chat/completions``)."""
        return self._url

    @property
    def model(self) -> str:
        return self._model

    def close(self) -> None:
        """Close the connection pool."""
        self._client.close()

    def __enter__(self) -> OpenAIChatModel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def complete_json(self, system: str, user: str, *, schema_hint: str = "") -> Any:
        """Ask with a system and a user message in JSON mode; the answer's content parsed as JSON.

        ``schema_hint`` (the JSON shape wanted) is appended to the system message: JSON mode promises JSON,
        not a shape, so the caller still validates what comes back.

        Raises:
            LlmError: the endpoint failed after its retries, refused the request, or answered no JSON.
        """
        prompt = f"{system}\n\nAnswer with JSON only: {schema_hint}" if schema_hint else system
        body = {"model": self._model, "temperature": 0, "response_format": {"type": "json_object"},
                "messages": [{"role": "system", "content": prompt}, {"role": "user", "content": user}]}
        payload = self._post(body)
        try:
            content = payload["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            raise self._error("the answer has no choices[0].message.content") from None
        try:
            return parse_content(content)
        except ValueError as exc:
            raise self._error(f"the answer is not JSON ({exc})") from None

    # ---------------------------------------------------------------- internals

    def _post(self, body: dict[str, Any]) -> Any:
        """The answer's JSON body, after at most ``1 + retries`` attempts."""
        for attempt in range(self._retries + 1):
            last = attempt == self._retries
            with self._lock:
                self.calls += 1
            try:
                response = self._client.post(self._url, json=body)
            except httpx.TimeoutException:
                if last:
                    raise self._error("no answer within llm.timeout_s", timeout=True) from None
                self._backoff(attempt, None, "timed out")
                continue
            except httpx.HTTPError as exc:
                if last:
                    raise self._error(f"unreachable ({type(exc).__name__}: {exc})") from None
                self._backoff(attempt, None, type(exc).__name__)
                continue
            if response.status_code == 200:
                try:
                    return response.json()
                except ValueError:
                    raise self._error("the response body is not JSON") from None
            if response.status_code not in RETRIED_STATUSES or last:
                raise self._refusal(response)
            self._backoff(attempt, response.headers.get("Retry-After"), f"status {response.status_code}")
        raise AssertionError("unreachable")

    def _backoff(self, attempt: int, retry_after: str | None, why: str) -> None:
        delay = min(MAX_BACKOFF_S, BACKOFF_S * 2 ** attempt)
        # An HTTP date is not read: the backoff stays (a clock-skewed date would mislead more than help).
        if retry_after is not None:
            with contextlib.suppress(ValueError):
                delay = min(MAX_RETRY_AFTER_S, max(0.0, float(retry_after)))
        log.info("chat model at %s: %s; retrying in %.1f s", self._url, why, delay)
        self._sleep(delay)

    def _refusal(self, response: httpx.Response) -> LlmError:
        """The error for a non-200 answer, with the server's own message (OpenAI error shape) when it gave one."""
        message = error_message(response)
        status = response.status_code
        if status in {401, 403}:
            hint = "Set llm.key to the endpoint's key (`m3 secret set llm.key`)."
        elif status == 404:
            hint = f"The endpoint does not serve {self._model!r} (or llm.url is wrong); see its /v1/models."
        else:
            hint = None
        return self._error(f"answered {status}: {message}", hint=hint, status=status)

    def _error(self, what: str, *, hint: str | None = None, **details: Any) -> LlmError:
        return LlmError(f"the chat model at {self._url} {what}" if what.startswith(("answered", "unreachable"))
                        else f"the chat model at {self._url}: {what}", hint=hint,
                        details={"url": self._url, "model": self._model, **details})


def chat_model_from_config(config: Config, *, sleep: Callable[[float], None] = time.sleep) -> OpenAIChatModel | None:
    """The configured chat model, or None when ``llm.url`` is empty (no model: rules only).

    Raises:
        ConfigError: ``llm.url`` is not an http(s) URL, or ``llm.model`` is empty.
    """
    if not config["llm.url"]:
        return None
    return OpenAIChatModel(config["llm.url"], config["llm.model"], key=config["llm.key"],
                           timeout_s=config["llm.timeout_s"], retries=config["llm.retries"], sleep=sleep)
