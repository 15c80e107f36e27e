"""Errors that name what is wrong and where, so a user can fix the input."""

from __future__ import annotations


class RadrankError(Exception):
    """Base class of radrank's own errors."""


class ConfigError(RadrankError):
    """The workflow configuration or a sheet it names is invalid."""


class InputError(RadrankError):
    """A submission or reference file cannot be used.

    The message always names the file and, when known, the field and the row
    (the JSON key or 0-based position, or the 1-based CSV line).
    """

    def __init__(self, path, message: str, *, field: str | None = None, row=None):
        self.path = str(path)
        self.field = field
        self.row = row
        where = [f"file {self.path}"]
        if row is not None:
            where.append(f"row {row}")
        if field is not None:
            where.append(f"field '{field}'")
        super().__init__(f"{', '.join(where)}: {message}")


class MissingWeightsError(RadrankError):
    """A model's weights are not available locally and may not be downloaded."""
