"""Provider hints: per-model cost rates in ``~/memstrata/providers.json``.

The file has the documented shape::

    {"providers": {"<provider>": {"models": {"<model>": {
        "input_cost_per_mtok": 3.0, "output_cost_per_mtok": 15.0,
        "cache_read_cost_per_mtok": 0.3, "cache_write_cost_per_mtok": 3.75}}}}}

(the cache rates are MemStrata's addition and optional: a model without
them gets its provider family's multipliers of the input rate, see
:func:`cache_factors`; ``cache_write_1h_cost_per_mtok``, Anthropic's 1-hour
cache writes, likewise), plus two optional keys MemStrata understands: ``base_url`` inside a provider
(the upstream the proxy forwards to) and a top-level
``billing_cycle_start_day`` (1–31; default 1).

Model keys are exact names, shell-style patterns (``claude-sonnet-4*``) or
``*``.  Lookup order for a model sent through a provider's endpoint: exact
name (that provider first, then any), then the longest matching pattern
(same order), then that provider's ``*``.  Another provider's bare ``*`` never
applies — a model nobody lists has rate ``None`` (unknown), never a guess.
"""

from __future__ import annotations

import copy
import fnmatch
import json
import logging
import math
import os
from dataclasses import dataclass
from pathlib import Path

from memstrata.storage.files import atomic_write_text

PROVIDERS_FILE = "providers.json"
# Where requests go when no provider names a base URL.  Here rather than in
# upstream.py so the CLI can show them without importing the proxy.
DEFAULT_OPENAI_BASE = "https://api.openai.com/v1"
DEFAULT_ANTHROPIC_BASE = "https://api.anthropic.com"
WILDCARD = "*"

log = logging.getLogger(__name__)

# List prices (USD per million tokens) when this file was written; edit the
# file or use `memstrata config set provider-rate` when they change.  Cache
# rates: Anthropic bills prompt-cache reads at 0.1x, 5-minute cache writes at
# 1.25x and 1-hour cache writes (a breakpoint marked `"ttl": "1h"`) at 2x the
# input rate; OpenAI bills cached input at a discount and writes at
# the plain input rate.
def _m(inp: float, out: float, read: float, write: float) -> dict:
    return {"input_cost_per_mtok": inp, "output_cost_per_mtok": out,
            "cache_read_cost_per_mtok": read, "cache_write_cost_per_mtok": write}


# Anthropic bills a write to its 1-hour cache at twice the input rate (5-minute writes: 1.25x).
ANTHROPIC_WRITE_1H_FACTOR = 2.0


def _claude(inp: float, out: float, read: float, write: float) -> dict:
    """A Claude model's rates, with its 1-hour cache writes at Anthropic's published 2x the input rate."""
    return {**_m(inp, out, read, write), "cache_write_1h_cost_per_mtok": round(inp * ANTHROPIC_WRITE_1H_FACTOR, 6)}


DEFAULT_PROVIDERS: dict = {
    "billing_cycle_start_day": 1,
    "providers": {
        "anthropic": {
            "models": {
                "claude-3-7-sonnet-20250219": _claude(3.00, 15.00, 0.30, 3.75),
                "claude-sonnet-4*": _claude(3.00, 15.00, 0.30, 3.75),
                "claude-opus-4*": _claude(15.00, 75.00, 1.50, 18.75),
                "claude-opus-4-5*": _claude(5.00, 25.00, 0.50, 6.25),
                "claude-opus-4-6*": _claude(5.00, 25.00, 0.50, 6.25),
                "claude-opus-4-7*": _claude(5.00, 25.00, 0.50, 6.25),
                "claude-opus-4-8*": _claude(5.00, 25.00, 0.50, 6.25),
                "claude-opus-5*": _claude(5.00, 25.00, 0.50, 6.25),
                "claude-opus-5-5*": _claude(4.00, 20.00, 0.20, 5.00),
                "claude-sonnet-5*": _claude(2.00, 10.00, 0.20, 2.50),
                "claude-fable-5*": _claude(10.00, 50.00, 1.00, 12.50),
                "claude-fable-5-1*": _claude(10.00, 50.00, 0.25, 12.50),
                "claude-mythos-5*": _claude(10.00, 50.00, 1.00, 12.50),
                "claude-mythos-5-1*": _claude(10.00, 50.00, 0.25, 12.50),
                "claude-haiku-4-5*": _claude(1.00, 5.00, 0.10, 1.25),
                "claude-3-5-haiku*": _claude(0.80, 4.00, 0.08, 1.00),
            }
        },
        "openai": {
            "models": {
                "gpt-4o": _m(2.50, 10.00, 1.25, 2.50),
                "gpt-4o-mini": _m(0.15, 0.60, 0.075, 0.15),
                "gpt-4.1": _m(2.00, 8.00, 0.50, 2.00),
                "gpt-4.1-mini": _m(0.40, 1.60, 0.10, 0.40),
                # Exact names: the GPT-5 releases price their variants (pro, mini, codex-mini)
                # apart, so a pattern would misprice the next one.
                "gpt-5": _m(1.25, 10.00, 0.125, 1.25),
                "gpt-5-codex": _m(1.25, 10.00, 0.125, 1.25),
                "gpt-5-mini": _m(0.25, 2.00, 0.025, 0.25),
                "gpt-5-nano": _m(0.05, 0.40, 0.005, 0.05),
                "gpt-5.1": _m(1.25, 10.00, 0.125, 1.25),
                "gpt-5.1-codex": _m(1.25, 10.00, 0.125, 1.25),
                "gpt-5.2": _m(1.75, 14.00, 0.175, 1.75),
                "gpt-5.2-codex": _m(1.75, 14.00, 0.175, 1.75),
                "gpt-5.3-codex": _m(1.75, 14.00, 0.175, 1.75),
                "gpt-5.4": _m(2.50, 15.00, 0.25, 2.50),
                "gpt-5.4-mini": _m(0.75, 4.50, 0.075, 0.75),
                "gpt-5.5": _m(5.00, 30.00, 0.50, 5.00),
            }
        },
        "ollama": {
            "base_url": "http://127.0.0.1:11434/v1",
            "models": {
                "*": _m(0.0, 0.0, 0.0, 0.0),
            },
        },
    },
}

# A model listed without cache rates: derive them from its input rate the way
# its provider family bills caching (Anthropic-style for Claude models or the
# "anthropic" entry, OpenAI-style otherwise).
ANTHROPIC_CACHE_FACTORS = (0.10, 1.25)  # (read, write) x input rate
OPENAI_CACHE_FACTORS = (0.50, 1.00)

# Which provider a model name most likely belongs to, for `config set` when
# the file does not list the model yet.
_PREFIX_PROVIDER = (("claude", "anthropic"), ("gpt-", "openai"), ("o1", "openai"), ("o3", "openai"),
                    ("o4", "openai"), ("chatgpt", "openai"))


class ProvidersError(Exception):
    """providers.json is unreadable or invalid, or a change to it is invalid."""


@dataclass(frozen=True)
class Rate:
    """USD per million tokens for one model; cache rates are never None (derived when unlisted)."""

    provider: str
    model_key: str  # the key that matched (exact name, pattern or '*')
    input_cost_per_mtok: float
    output_cost_per_mtok: float | None
    cache_read_cost_per_mtok: float = 0.0
    cache_write_cost_per_mtok: float = 0.0
    cache_rates_listed: bool = True  # False: derived from the input rate
    # Anthropic's 1-hour cache writes (breakpoints marked "ttl": "1h"); cache_write_cost_per_mtok is
    # the 5-minute one.  0.0 only for a Rate built by hand: _rate always fills it in.
    cache_write_1h_cost_per_mtok: float = 0.0
    cache_write_1h_listed: bool = True  # False: derived (see cache_write_1h_factor)

    @property
    def input_per_token(self) -> float:
        return self.input_cost_per_mtok / 1_000_000

    @property
    def output_per_token(self) -> float | None:
        return None if self.output_cost_per_mtok is None else self.output_cost_per_mtok / 1_000_000

    @property
    def cache_read_per_token(self) -> float:
        return self.cache_read_cost_per_mtok / 1_000_000

    @property
    def cache_write_per_token(self) -> float:
        return self.cache_write_cost_per_mtok / 1_000_000

    @property
    def cache_write_1h_per_token(self) -> float:
        return self.cache_write_1h_cost_per_mtok / 1_000_000


def memstrata_home() -> Path:
    env = os.environ.get("MEMSTRATA_HOME")
    return Path(env).expanduser() if env else Path.home() / "memstrata"


def providers_path() -> Path:
    return memstrata_home() / PROVIDERS_FILE


def _json_error(exc: json.JSONDecodeError) -> str:
    """``invalid control character at line 1, column 9``: the decoder's message ends in a
    dangling "at" ("Invalid control character at") that its position completes."""
    msg = exc.msg.removesuffix(" at")
    return f"{msg[:1].lower()}{msg[1:]} at line {exc.lineno}, column {exc.colno}"


def display_path(path: Path) -> str:
    """The path with the home directory shortened to ``~``."""
    try:
        return "~/" + str(path.relative_to(Path.home()))
    except ValueError:
        return str(path)


def _lookup(providers: dict, model: str, provider: str | None) -> tuple[tuple[int, int], Rate] | None:
    """The best entry of ``providers`` for ``model`` with how specific it is: (2, 0) an exact
    name (the endpoint's provider first, then any), (1, length) the longest matching pattern,
    (0, 0) the endpoint's provider's ``*``; another provider's ``*`` never applies."""
    order = [p for p in ([provider] if provider in providers else [])]
    order += [p for p in providers if p != provider]
    for name in order:
        models = providers[name].get("models", {})
        if model in models and model != WILDCARD:
            return (2, 0), _rate(name, model, models[model])
    best: tuple[int, str, str] | None = None
    for name in order:
        for key in providers[name].get("models", {}):
            if key != WILDCARD and _is_pattern(key) and fnmatch.fnmatchcase(model, key):
                if best is None or len(key) > best[0]:
                    best = (len(key), name, key)
    if best is not None:
        length, name, key = best
        return (1, length), _rate(name, key, providers[name]["models"][key])
    if provider in providers:
        models = providers[provider].get("models", {})
        if WILDCARD in models:
            return (0, 0), _rate(provider, WILDCARD, models[WILDCARD])
    return None


class Providers:
    def __init__(self, data: dict, path: Path | None = None):
        _validate(data)
        self.data = data
        self.path = path

    @classmethod
    def defaults(cls) -> "Providers":
        return cls(copy.deepcopy(DEFAULT_PROVIDERS))

    @classmethod
    def load(cls, path: Path | None = None, *, create: bool = True) -> "Providers":
        """Read the file, writing the defaults first if it does not exist."""
        path = path or providers_path()
        if not path.exists():
            inst = cls(copy.deepcopy(DEFAULT_PROVIDERS), path)
            if create:
                # Writing the defaults is a courtesy to a person who later edits the file: a
                # home folder that cannot take it (read-only, or MEMSTRATA_HOME naming a file
                # or a missing mount) still reads the shipped rates; only a change must be saved.
                try:
                    inst.save()
                except ProvidersError as exc:
                    log.warning("%s; using the shipped rates", exc)
            return inst
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ProvidersError(f"cannot read {display_path(path)}: {exc.strerror}") from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ProvidersError(f"{display_path(path)} is not valid JSON: {_json_error(exc)}") from None
        try:
            return cls(data, path)
        except ProvidersError as exc:
            raise ProvidersError(f"{display_path(path)}: {exc}") from None

    def save(self) -> None:
        if self.path is None:
            raise ProvidersError("these provider hints have no file")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(self.path, json.dumps(self.data, indent=2) + "\n")
        except OSError as exc:
            # mkdir's "File exists" for a home that is a file says nothing a person can act on
            folder = next((f for f in (self.path.parent, *self.path.parent.parents) if os.path.lexists(f)), None)
            reason = (f"{display_path(folder)} is not a folder" if folder is not None and not folder.is_dir()
                      else exc.strerror or str(exc))
            raise ProvidersError(f"cannot write {display_path(self.path)}: {reason} "
                                 f"(MEMSTRATA_HOME chooses another folder)") from None

    # -- reads ------------------------------------------------------------------

    @property
    def providers(self) -> dict[str, dict]:
        return self.data.get("providers", {})

    @property
    def billing_cycle_start_day(self) -> int:
        return int(self.data.get("billing_cycle_start_day", 1))

    def base_url(self, provider: str) -> str | None:
        return self.providers.get(provider, {}).get("base_url")

    def rate(self, model: str | None, provider: str | None = None) -> Rate | None:
        """The rate for ``model`` sent through ``provider``'s endpoint, or None if unknown.

        The file's entries first; the rates MemStrata ships fill in a model the file has no
        entry of its own for, and a newer model a broader pattern of the file would misprice:
        a file written by an earlier release holds the defaults of its day, where
        ``claude-opus-4*`` priced every later Opus 4 at the first one's rate.  So a shipped
        entry more specific than the file's match (an exact name over a pattern, a longer
        pattern over a shorter one) is taken; the file's own provider ``*`` always stands."""
        if not model:
            return None
        own = _lookup(self.providers, model, provider)
        if own is not None and own[0][0] == 0:  # the endpoint's provider's `*`: the file's choice
            return own[1]
        shipped = _lookup(DEFAULT_PROVIDERS["providers"], model, provider)
        if shipped is not None and (own is None or shipped[0] > own[0]):
            return shipped[1]
        return None if own is None else own[1]

    def rows(self) -> list[Rate]:
        """Every listed model's rate, in file order, for display."""
        return [_rate(name, key, r) for name, p in self.providers.items() for key, r in p.get("models", {}).items()]

    # -- changes ----------------------------------------------------------------

    def set_rate(self, model: str, input_cost_per_mtok: float, provider: str | None = None, *,
                 output: float | None = None, cache_read: float | None = None,
                 cache_write: float | None = None, cache_write_1h: float | None = None) -> str:
        """Set a model's input rate (USD per million tokens) and, when given, its
        output and cache rates; returns the provider it was filed under."""
        model = model.strip()
        if not model:
            raise ProvidersError("model name is empty")
        for value in (input_cost_per_mtok, output, cache_read, cache_write, cache_write_1h):
            if value is not None and not _valid_cost(value):
                raise ProvidersError(f"rate must be a number of USD per million tokens from 0 to "
                                     f"{MAX_COST_PER_MTOK:,.0f}, got {value!r}")
        if provider is None:
            provider = self._provider_for(model)
        models = self.providers.setdefault(provider, {}).setdefault("models", {})
        entry = models.setdefault(model, {})
        entry["input_cost_per_mtok"] = float(input_cost_per_mtok)
        entry.setdefault("output_cost_per_mtok", None)
        for key, value in (("output_cost_per_mtok", output), ("cache_read_cost_per_mtok", cache_read),
                           ("cache_write_cost_per_mtok", cache_write),
                           ("cache_write_1h_cost_per_mtok", cache_write_1h)):
            if value is not None:
                entry[key] = float(value)
        _validate(self.data)
        return provider

    def set_billing_day(self, day: int) -> None:
        if not isinstance(day, int) or not 1 <= day <= 31:
            raise ProvidersError(f"billing cycle start day must be 1-31, got {day!r}")
        self.data["billing_cycle_start_day"] = day

    def _provider_for(self, model: str) -> str:
        holders = [n for n, p in self.providers.items() if model in p.get("models", {})]
        if len(holders) == 1:
            return holders[0]
        if len(holders) > 1:
            raise ProvidersError(f"{model} is listed under {', '.join(holders)}; say which with --provider")
        for prefix, provider in _PREFIX_PROVIDER:
            if model.startswith(prefix):
                return provider
        raise ProvidersError(f"cannot tell which provider serves {model}; say it with --provider")


def _is_pattern(key: str) -> bool:
    return any(ch in key for ch in "*?[")


# The dearest published rate is a few hundred dollars per million tokens; a figure past this is a
# typo (a rate per token typed per million, an extra zero run) and would print a 300-digit bill.
MAX_COST_PER_MTOK = 100_000.0


def _valid_cost(v: object) -> bool:
    return (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
            and 0 <= v <= MAX_COST_PER_MTOK)


def cache_factors(provider: str, model_key: str) -> tuple[float, float]:
    """(read, write) multipliers of the input rate for a model listed without cache rates."""
    if provider == "anthropic" or model_key.startswith("claude"):
        return ANTHROPIC_CACHE_FACTORS
    return OPENAI_CACHE_FACTORS


def cache_write_1h_factor(provider: str, model_key: str) -> float | None:
    """The 1-hour cache write's multiplier of the input rate for a model listed without it: Anthropic's
    2x; None elsewhere (no other provider has such writes: they are priced as its cache writes)."""
    return ANTHROPIC_WRITE_1H_FACTOR if cache_factors(provider, model_key) is ANTHROPIC_CACHE_FACTORS else None


def _rate(provider: str, key: str, entry: dict) -> Rate:
    out = entry.get("output_cost_per_mtok")
    inp = float(entry["input_cost_per_mtok"])
    read, write = entry.get("cache_read_cost_per_mtok"), entry.get("cache_write_cost_per_mtok")
    write_1h = entry.get("cache_write_1h_cost_per_mtok")
    f_read, f_write = cache_factors(provider, key)
    write = inp * f_write if write is None else float(write)
    if write_1h is None:
        f_1h = cache_write_1h_factor(provider, key)
        write_1h_rate = write if f_1h is None else inp * f_1h
    else:
        write_1h_rate = float(write_1h)
    return Rate(provider, key, inp, None if out is None else float(out),
                cache_read_cost_per_mtok=inp * f_read if read is None else float(read),
                cache_write_cost_per_mtok=write,
                cache_rates_listed=read is not None and entry.get("cache_write_cost_per_mtok") is not None,
                cache_write_1h_cost_per_mtok=write_1h_rate, cache_write_1h_listed=write_1h is not None)


def _validate(data: object) -> None:
    if not isinstance(data, dict) or not isinstance(data.get("providers"), dict):
        raise ProvidersError('expected an object with a "providers" object')
    day = data.get("billing_cycle_start_day", 1)
    if not isinstance(day, int) or isinstance(day, bool) or not 1 <= day <= 31:
        raise ProvidersError("billing_cycle_start_day must be an integer 1-31")
    for name, p in data["providers"].items():
        if not isinstance(p, dict) or not isinstance(p.get("models", {}), dict):
            raise ProvidersError(f'provider "{name}" must be an object with a "models" object')
        base = p.get("base_url")
        if base is not None and (not isinstance(base, str) or not base.startswith(("http://", "https://"))):
            raise ProvidersError(f'provider "{name}": base_url must be an http(s) URL')
        for key, r in p.get("models", {}).items():
            if not isinstance(r, dict) or not _valid_cost(r.get("input_cost_per_mtok")):
                raise ProvidersError(f'{name} / {key}: input_cost_per_mtok must be a number from 0 to '
                                     f'{MAX_COST_PER_MTOK:,.0f}')
            for field_name in ("output_cost_per_mtok", "cache_read_cost_per_mtok", "cache_write_cost_per_mtok",
                               "cache_write_1h_cost_per_mtok"):
                v = r.get(field_name)
                if v is not None and not _valid_cost(v):
                    raise ProvidersError(f'{name} / {key}: {field_name} must be a number from 0 to '
                                         f'{MAX_COST_PER_MTOK:,.0f}, or null')
