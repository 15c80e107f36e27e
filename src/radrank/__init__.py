"""radrank: reproducible leaderboards for radiology report generation.

Importing the package is cheap: it loads no model framework. Metric modules are
resolved lazily through :mod:`radrank.metrics`.
"""

__version__ = "0.1.0"

from radrank.errors import InputError, ConfigError  # noqa: E402  (light modules only)

__all__ = ["__version__", "InputError", "ConfigError"]
