"""Typed, frozen settings: what a metric (or engine) can be told, checked once, where the config is read.

A settings class is a frozen dataclass whose every field is declared with :func:`scored` (the value
changes the numbers: it is part of the identity that decides what is re-scored) or :func:`speed`
(it changes only how fast or where: batch sizes, devices, caches). Each field has a type annotation
and a one-line description; :meth:`Settings.build` turns a config mapping into an instance and
rejects, with a :class:`~radrank.errors.ConfigError` naming ``<where>.<key>`` and what is allowed:

* a key that is not a field (with the closest field name when there is one);
* a value of the wrong type — booleans are only ``true``/``false`` (``"yes please"`` is refused, not
  truthy), integers are not booleans, floats are finite numbers, strings are strings, ``X | None``
  admits ``null``, ``Literal[...]`` admits its values only, ``tuple[str, ...]`` a list of strings;
* a value outside a field's bounds (``minimum``/``maximum``) or failing the class's :meth:`Settings.check`.

Defaults live in the class and nowhere else. ``identity()`` is the dict of the scoring fields, the
only settings a workflow rule's identity holds.

The top-level ``trust_remote_code`` allow-list reaches a settings class as a field declared with
:func:`remote_code` (filled by the workflow, never set per metric). The list itself is not an output's
cause: only whether *the* model the code loads is on it, so its identity is that yes/no (``true`` /
``false``), never the list — adding an unrelated id to the list re-scores nothing.

An endpoint URL is declared ``scored(..., secret_url=True)``: its identity is the URL without user name,
password or secret-looking query parameters (:func:`radrank.provenance.redact_url`), so a rule's params
(which Snakemake stores in ``.snakemake/metadata``) never hold a credential and a change of credentials
re-scores nothing; the instance keeps the URL as configured (requests use it), and building one masks
its credentials in every log record of the process (:func:`radrank.provenance.protect_url`).
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import types
import typing
from dataclasses import dataclass, field
from functools import lru_cache

from radrank.errors import ConfigError

_MISSING = dataclasses.MISSING


def _field(default, doc: str, scores: bool, minimum=None, maximum=None, secret_url: bool = False,
           remote_code_of: str | None = None):
    if not doc:
        raise TypeError("every setting needs a description")
    meta = {"scores": scores, "doc": doc, "minimum": minimum, "maximum": maximum, "secret_url": secret_url,
            "remote_code_of": remote_code_of}
    if isinstance(default, (list, dict, set)):
        raise TypeError("settings defaults are immutable: use a tuple")
    return field(default=default, metadata=meta)


def scored(default, doc: str, *, minimum=None, maximum=None, secret_url: bool = False):
    """A setting whose value changes the metric's numbers (part of its identity). ``secret_url``: the value is
    an endpoint URL that may carry credentials, which the identity leaves out (see the module docstring)."""
    return _field(default, doc, True, minimum, maximum, secret_url)


def speed(default, doc: str, *, minimum=None, maximum=None):
    """A setting that changes only speed, memory or placement, never a number."""
    return _field(default, doc, False, minimum, maximum)


def remote_code(model: str = "model"):
    """The top-level ``trust_remote_code`` allow-list (``tuple[str, ...]``, filled by the workflow). ``model``: the
    field naming the model the code loads; the identity holds whether that model is on the list (true/false),
    never the list (see the module docstring)."""
    return _field((), f"the top-level trust_remote_code list (set there, never here); only whether {model} is on "
                      "it (yes/no) is in the identity, so an unrelated id re-scores nothing", True,
                  remote_code_of=model)


def on_allow_list(model, allow_list) -> bool:
    """True only when ``model`` (the id or path exactly as configured) is on the allow-list (the one rule:
    :func:`radrank.runtime.allows_remote_code` is this function)."""
    return bool(model) and model in set(allow_list or ())


@dataclass(frozen=True)
class Settings:
    """Base of every settings class (see the module docstring)."""

    def check(self, where: str) -> None:
        """Cross-field rules; raise :func:`Settings.fail` (a ConfigError naming the key)."""

    @staticmethod
    def fail(where: str, key: str, message: str) -> ConfigError:
        return ConfigError(f"config {where}.{key}: {message}")

    @classmethod
    def build(cls, values: dict | None = None, *, where: str = "settings", **fixed):
        """An instance from a config mapping (defaults for keys left out), checked.

        ``fixed`` are values set by the workflow itself (e.g. the remote-code allow-list); they are
        type-checked like the rest but may not be given in ``values``.
        """
        values = dict(values or {})
        if not isinstance(values, dict):
            raise ConfigError(f"config {where} must be a mapping of setting names to values")
        specs = field_specs(cls)
        unknown = [k for k in values if k not in specs]
        if unknown:
            key = unknown[0]
            close = difflib.get_close_matches(str(key), list(specs), n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            allowed = ", ".join(specs) if specs else "it has none"
            raise ConfigError(f"config {where}.{key}: no such setting{hint}; allowed: {allowed}")
        merged = {}
        for name, spec in specs.items():
            if name in values:
                merged[name] = spec.convert(values[name], f"{where}.{name}")
            elif name in fixed:
                merged[name] = spec.convert(fixed[name], f"{where}.{name}")
        instance = cls(**merged)
        instance.check(where)
        for f in dataclasses.fields(instance):
            if f.metadata.get("secret_url"):
                from radrank.provenance import protect_url

                protect_url(getattr(instance, f.name))
        return instance

    def replace(self, *, where: str = "settings", **changes):
        """A copy with ``changes``, checked as :meth:`build` checks."""
        return type(self).build({**self.as_dict(), **changes}, where=where)

    def as_dict(self) -> dict:
        """Every field, JSON-ready (tuples as lists)."""
        return {f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self)}

    def identity(self) -> dict:
        """The scoring fields only: what a change of settings must re-score (endpoint URLs without their
        credentials; the remote-code allow-list as whether this model is on it)."""
        return {f.name: _identity_value(self, f) for f in dataclasses.fields(self) if f.metadata["scores"]}

    def speed_only(self) -> dict:
        return {f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self) if not f.metadata["scores"]}


@dataclass(frozen=True)
class NoSettings(Settings):
    """For a metric that takes no settings."""


def _plain(value):
    return list(value) if isinstance(value, tuple) else value


def _identity_value(instance, f):
    value = getattr(instance, f.name)
    model = f.metadata.get("remote_code_of")
    if model:
        return on_allow_list(getattr(instance, model), value)
    if f.metadata.get("secret_url") and isinstance(value, str):
        from radrank.provenance import redact_url

        return redact_url(value, mask=None)
    return _plain(value)


# --- field specifications ---------------------------------------------------------------------------


@dataclass(frozen=True)
class FieldSpec:
    name: str
    kinds: tuple  # accepted kinds: bool, int, float, str, None, ("literal", values), ("strings",)
    default: object
    scores: bool
    doc: str
    minimum: object = None
    maximum: object = None

    def describe(self) -> str:
        """What values are allowed, in words (for messages and the generated config documentation)."""
        words = []
        for kind in self.kinds:
            if kind is bool:
                words.append("true or false")
            elif kind is int:
                words.append("an integer" + _bounds(self.minimum, self.maximum))
            elif kind is float:
                words.append("a number" + _bounds(self.minimum, self.maximum))
            elif kind is str:
                words.append("a string")
            elif kind is None:
                words.append("null")
            elif kind[0] == "literal":
                words.append(" or ".join(repr(v) if isinstance(v, str) else str(v).lower() for v in kind[1]))
            elif kind[0] == "strings":
                words.append("a list of strings")
        return " or ".join(words)

    def convert(self, value, key: str):
        """The value as stored, or a ConfigError naming ``key``."""
        for kind in self.kinds:
            ok, converted = _accepts(kind, value)
            if ok:
                if isinstance(converted, (int, float)) and not isinstance(converted, bool):
                    if self.minimum is not None and converted < self.minimum:
                        raise ConfigError(f"config {key}: {value!r} is below the minimum {self.minimum}")
                    if self.maximum is not None and converted > self.maximum:
                        raise ConfigError(f"config {key}: {value!r} is above the maximum {self.maximum}")
                return converted
        raise ConfigError(f"config {key}: {value!r} is not allowed; expected {self.describe()}")


def _bounds(minimum, maximum) -> str:
    if minimum is not None and maximum is not None:
        return f" from {minimum} to {maximum}"
    if minimum is not None:
        return f" ≥ {minimum}"
    if maximum is not None:
        return f" ≤ {maximum}"
    return ""


def _accepts(kind, value):
    if kind is None:
        return value is None, None
    if kind is bool:
        return isinstance(value, bool), value
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool), value
    if kind is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        return ok, float(value) if ok else None
    if kind is str:
        return isinstance(value, str), value
    if kind[0] == "literal":
        ok = any(value == v and type(value) is type(v) for v in kind[1])
        return ok, value
    if kind[0] == "strings":
        ok = isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)
        return ok, tuple(value) if ok else None
    raise TypeError(kind)


def _kinds(annotation) -> tuple:
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        out = ()
        for arg in typing.get_args(annotation):
            out += _kinds(arg)
        return out
    if annotation is type(None):
        return (None,)
    if origin is typing.Literal:
        return (("literal", typing.get_args(annotation)),)
    if origin is tuple:
        args = typing.get_args(annotation)
        if args == (str, Ellipsis):
            return (("strings",),)
    if annotation in (bool, int, float, str):
        return (annotation,)
    raise TypeError(f"unsupported settings type {annotation!r}")


@lru_cache(maxsize=None)
def _specs(cls) -> tuple:
    hints = typing.get_type_hints(cls)  # each field's annotation read in the module that declares it
    out = []
    for f in dataclasses.fields(cls):
        if "scores" not in f.metadata:
            raise TypeError(f"{cls.__qualname__}.{f.name}: declare it with scored() or speed()")
        out.append(FieldSpec(f.name, _kinds(hints[f.name]), f.default, f.metadata["scores"], f.metadata["doc"],
                             f.metadata["minimum"], f.metadata["maximum"]))
    return tuple(out)


def field_specs(cls) -> dict:
    """name -> :class:`FieldSpec` of a settings class, in declaration order."""
    return {s.name: s for s in _specs(cls)}
