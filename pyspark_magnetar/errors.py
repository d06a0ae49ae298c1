"""The connector's exceptions.

Every error the connector raises on purpose is a :class:`MagnetarSparkError`,
so a caller (or a test) can tell "the connector refused" from "Spark or the
broker broke". Spark wraps them (AnalysisException, StreamingQueryException,
SparkException); the message text survives the wrapping, so messages name
the option or topic at fault.
"""
from __future__ import annotations


class MagnetarSparkError(Exception):
    """Base of the connector's own errors."""


class OptionError(MagnetarSparkError, ValueError):
    """An option is missing, malformed, or contradicts another one."""


class TopicNotFoundError(OptionError):
    """A topic named by ``topic``/``topics`` (or an offsets JSON) does not exist."""


class DataLossError(MagnetarSparkError):
    """Offsets the query must read are gone (retention, topic deleted and
    recreated) or did not arrive within ``pollTimeoutMs``. Raised only with
    ``failOnDataLoss`` on (the default)."""


class SinkError(MagnetarSparkError):
    """A row cannot be written (bad column value) or the broker refused it."""
