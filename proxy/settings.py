"""Session settings, declared once: SET/SHOW/RESET, startup parameters and docs all derive from
:data:`SETTINGS`.

Clients set a handful of standard PostgreSQL parameters on connect (psql, JDBC and psycopg do);
Veil accepts them so those clients work, even when they change nothing in Veil's behaviour.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from proxy.errors import InvalidParameterValueError, UndefinedObjectError


@dataclass(frozen=True)
class Setting:
    name: str
    default: str
    help: str
    normalize: Callable[[str], str] = str
    reported: bool = False  # sent as ParameterStatus at startup and when changed


def _epsilon(value: str) -> str:
    try:
        number = float(value)
    except ValueError:
        raise InvalidParameterValueError(
            f'invalid value for parameter "veil.epsilon": "{value}"', hint="use a positive number such as 0.1"
        ) from None
    if not math.isfinite(number) or number <= 0:
        raise InvalidParameterValueError(
            f'invalid value for parameter "veil.epsilon": "{value}"', hint="epsilon must be greater than 0"
        )
    return repr(number)


def _delta(value: str) -> str:
    try:
        number = float(value)
    except ValueError:
        number = math.nan
    if not (math.isfinite(number) and 0 <= number < 1):
        raise InvalidParameterValueError(
            f'invalid value for parameter "veil.delta": "{value}"',
            hint="use a number in [0, 1), such as 1e-6",
        )
    return repr(number)


def _mechanism(value: str) -> str:
    if value.lower() not in ("laplace", "gaussian"):
        raise InvalidParameterValueError(
            f'invalid value for parameter "veil.mechanism": "{value}"', hint="use laplace or gaussian"
        )
    return value.lower()


def _ttest_mode(value: str) -> str:
    if value.lower() not in ("sound", "paper"):
        raise InvalidParameterValueError(
            f'invalid value for parameter "veil.ttest_mode": "{value}"',
            hint="use sound (the default), or paper where the dataset's policy enables research_modes",
        )
    return value.lower()


MAX_ROUND_DIGITS = 15  # veil.round = n: as ROUND(x, n), with n from -15 to 15


def _round(value: str) -> str:
    """auto, off, or a number of decimal digits (negative: tens, hundreds…)."""
    word = value.strip().lower()
    if word in ("auto", "off"):
        return word
    try:
        digits = int(word)
    except ValueError:
        digits = MAX_ROUND_DIGITS + 1
    if abs(digits) > MAX_ROUND_DIGITS:
        raise InvalidParameterValueError(
            f'invalid value for parameter "veil.round": "{value}"',
            hint=f"use auto (the default), off, or a number of decimal digits from -{MAX_ROUND_DIGITS} "
            f"to {MAX_ROUND_DIGITS} (negative: tens, hundreds…)",
        )
    return str(digits)


def _on_off(value: str) -> str:
    words = {
        "on": "on",
        "true": "on",
        "1": "on",
        "yes": "on",
        "off": "off",
        "false": "off",
        "0": "off",
        "no": "off",
    }
    if value.lower() not in words:
        raise InvalidParameterValueError(
            f'invalid value for a boolean parameter: "{value}"', hint="use on or off"
        )
    return words[value.lower()]


def _utf8_only(value: str) -> str:
    """Like PostgreSQL, ignore case and non-alphanumerics: asyncpg sends ``'utf-8'`` with quotes."""
    if "".join(ch for ch in value if ch.isalnum()).upper() not in ("UTF8", "UNICODE"):
        raise InvalidParameterValueError(
            f'invalid value for parameter "client_encoding": "{value}"', hint="Veil speaks UTF8 only"
        )
    return "UTF8"


SETTINGS: tuple[Setting, ...] = (
    Setting(
        "veil.epsilon",
        "",
        "Epsilon spent by each DP query of this session (default: the dataset's default_epsilon; "
        "at most its max_epsilon).",
        _epsilon,
    ),
    Setting(
        "veil.delta",
        "0.0",
        "Delta spent by a query whose group keys come from the data (τ-thresholding); 0 refuses such queries.",
        _delta,
    ),
    Setting(
        "veil.mechanism",
        "laplace",
        "laplace (pure ε) or gaussian ((ε, δ) with veil.delta > 0, split over the noisy quantities).",
        _mechanism,
    ),
    Setting(
        "veil.ttest_mode",
        "sound",
        "veil_ttest's smooth bound: sound (proven), or paper (the seed's Algorithm 8, for reproduction; "
        "only where the dataset's policy sets research_modes = true).",
        _ttest_mode,
    ),
    Setting(
        "veil.other_row",
        "off",
        'on: GROUP BY answers end with one "(other)" row: the noisy total of every group not shown.',
        _on_off,
    ),
    Setting(
        "veil.raw_counts",
        "off",
        "on: noisy counts (and sums of columns whose bounds fix their sign) as drawn — unbiased, so sums "
        "of answers stay unbiased, but possibly negative; off: clamped at 0.",
        _on_off,
    ),
    Setting(
        "veil.round",
        "auto",
        "How noisy sums, averages, variances, quantiles, correlations and regressions are rounded: auto (to "
        "one digit below the noise's order of magnitude), off, or a number of decimal digits as in ROUND(x, n).",
        _round,
    ),
    Setting(
        "veil.show_error",
        "off",
        "on: a NOTICE after each DP answer gives, per noisy quantity, the 95% error bound of its noise.",
        _on_off,
    ),
    Setting("application_name", "", "Client application name, reported back to the client.", reported=True),
    Setting("client_encoding", "UTF8", "Only UTF8 is supported.", _utf8_only, reported=True),
    Setting(
        "DateStyle", "ISO, MDY", "Accepted for compatibility; dates are always sent in ISO.", reported=True
    ),
    Setting("IntervalStyle", "postgres", "Accepted for compatibility.", reported=True),
    Setting("TimeZone", "UTC", "Accepted for compatibility; timestamps are sent in UTC.", reported=True),
    Setting("extra_float_digits", "1", "Accepted for compatibility; floats are sent round-trip exact."),
    Setting("search_path", '"$user", public', "Accepted for compatibility."),
    Setting("statement_timeout", "0", "Accepted for compatibility."),
    Setting("lock_timeout", "0", "Accepted for compatibility."),
    Setting("idle_in_transaction_session_timeout", "0", "Accepted for compatibility."),
    Setting("bytea_output", "hex", "Accepted for compatibility."),
    Setting("default_transaction_read_only", "on", "Veil is read-only.", reported=True),
)

SETTINGS_BY_NAME: Mapping[str, Setting] = {setting.name.lower(): setting for setting in SETTINGS}

# Reported at startup but not settable: they describe the server, not the session.
SERVER_PARAMETERS: Mapping[str, str] = {
    "server_version": "16.0",
    "server_encoding": "UTF8",
    "integer_datetimes": "on",
    "standard_conforming_strings": "on",
    "is_superuser": "off",
    "in_hot_standby": "off",  # JDBC and libpq's target_session_attrs read it (PostgreSQL 14+)
}


def lookup(name: str) -> Setting:
    setting = SETTINGS_BY_NAME.get(name.lower())
    if setting is None:
        raise UndefinedObjectError(
            f'unrecognized configuration parameter "{name}"',
            hint="Veil settings are: " + ", ".join(s.name for s in SETTINGS if s.name.startswith("veil.")),
        )
    return setting


class SessionSettings:
    """The current values of one connection's settings (strings, as PostgreSQL keeps them)."""

    def __init__(self, startup: Mapping[str, str] | None = None) -> None:
        self._values: dict[str, str] = {}
        for name, value in (startup or {}).items():
            if name.lower() in SETTINGS_BY_NAME:
                self.set(name, value)

    def set(self, name: str, value: str) -> Setting:
        setting = lookup(name)
        self._values[setting.name.lower()] = setting.normalize(value)
        return setting

    def with_value(self, name: str, value: str) -> SessionSettings:
        """A copy of these settings with one more set; this session's own are left as they are."""
        copy = SessionSettings()
        copy._values = dict(self._values)
        copy.set(name, value)
        return copy

    def reset(self, name: str) -> Setting:
        setting = lookup(name)
        self._values.pop(setting.name.lower(), None)
        return setting

    def reset_all(self) -> None:
        self._values.clear()

    def get(self, name: str) -> str:
        setting = lookup(name)
        return self._values.get(setting.name.lower(), setting.default)

    def reported(self) -> dict[str, str]:
        """ParameterStatus values sent at startup."""
        values = {s.name: self.get(s.name) for s in SETTINGS if s.reported}
        return {**SERVER_PARAMETERS, **values}
