"""The ``llm`` tool's configuration, read from the environment in ``setup()``.

=============================== ================= ==================================================
``LLM_PROVIDER``                ``openai``        ``openai``: any server speaking OpenAI's chat
                                                  completions; ``echo``: the offline demo model
``LLM_BASE_URL``                none              e.g. ``https://api.openai.com/v1`` or
                                                  ``http://127.0.0.1:8080/v1``; requests go to
                                                  ``<base>/chat/completions``. Unset: the tool is OFF
``LLM_API_KEY``                 none              sent as ``Authorization: Bearer``; local servers
                                                  usually need none
``LLM_MODEL``                   none              the model used when a call passes ``model=""``
                                                  (and the model agents are declared with)
``LLM_TIMEOUT_SECONDS``         ``60``            the longest wait for the server's next bytes
``LLM_CONNECT_TIMEOUT_SECONDS`` ``10``            the longest wait to connect
``LLM_STREAM_USAGE``            ``true``          ask for the usage chunk (``stream_options``);
                                                  turn off for a server that rejects the field
``LLM_PROVIDER_NAME``           ``openai``        ``gen_ai.provider.name`` on spans and metrics
``LLM_PRICES``                  none              the price table as JSON (see :mod:`.pricing`)
``LLM_PRICES_FILE``             none              or a JSON file holding it (relative to the root)
=============================== ================= ==================================================

A value that cannot be used (an unknown provider, a negative timeout, a price table that is not
valid) raises ``ValueError`` from ``setup()``: the tool is DEAD with the reason, rather than
guessing. Only a missing ``LLM_BASE_URL`` makes it OFF, because that is the normal state of a
service that does not use a model.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from core.settings import env_choice, env_duration, env_flag, env_str

from .pricing import PriceTable

NOT_CONFIGURED = (
    "LLM not configured: set LLM_BASE_URL to an OpenAI-compatible server (with LLM_API_KEY and LLM_MODEL "
    "as it needs), or LLM_PROVIDER=echo for the offline demo model"
)
ECHO_MODEL = "echo"
FALLBACK_MODEL = "default"


class Provider(StrEnum):
    OPENAI = "openai"
    ECHO = "echo"


@dataclass(frozen=True)
class LlmConfig:
    provider: Provider
    base_url: str
    api_key: str
    model: str
    timeout: float
    connect_timeout: float
    stream_usage: bool
    provider_name: str
    prices: PriceTable

    @property
    def default_model(self) -> str:
        if self.model:
            return self.model
        return ECHO_MODEL if self.provider is Provider.ECHO else FALLBACK_MODEL


def load_config(project_root: Path) -> LlmConfig:
    """The configuration the environment describes; ``ValueError`` for a value that cannot be used."""
    provider = Provider(env_choice("LLM_PROVIDER", Provider.OPENAI.value, [p.value for p in Provider]))
    timeout = env_duration("LLM_TIMEOUT_SECONDS", 60.0, positive=True)
    connect_timeout = env_duration("LLM_CONNECT_TIMEOUT_SECONDS", 10.0, positive=True)
    default_name = "echo" if provider is Provider.ECHO else "openai"
    return LlmConfig(
        provider=provider,
        base_url=env_str("LLM_BASE_URL").rstrip("/"),
        api_key=env_str("LLM_API_KEY"),
        model=env_str("LLM_MODEL"),
        timeout=timeout,
        connect_timeout=connect_timeout,
        stream_usage=env_flag("LLM_STREAM_USAGE", True),
        provider_name=env_str("LLM_PROVIDER_NAME", default_name),
        prices=_prices(project_root),
    )


def _prices(project_root: Path) -> PriceTable:
    inline = env_str("LLM_PRICES")
    file_name = env_str("LLM_PRICES_FILE")
    if inline and file_name:
        raise ValueError("set LLM_PRICES or LLM_PRICES_FILE, not both")
    if inline:
        return PriceTable.from_json(inline, source="LLM_PRICES")
    if file_name:
        path = Path(file_name)
        path = path if path.is_absolute() else project_root / path
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ValueError(f"LLM_PRICES_FILE={file_name!r} cannot be read: {exc}") from exc
        return PriceTable.from_json(text, source=str(path))
    return PriceTable({})
