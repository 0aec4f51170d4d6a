"""One small flat hierarchy of domain errors; the CLI turns them into one clear line."""


class TotalRecallError(Exception):
    """Base of every error a user may see as a one-line message."""


class ConfigError(TotalRecallError):
    """A setting is missing or malformed."""


class SchemaError(TotalRecallError):
    """The database schema cannot be used by this version of the code."""


class MigrationError(SchemaError):
    """A migration failed; the database was left as it was."""


class DaemonRunning(TotalRecallError):
    """Another daemon already owns this home folder."""


class TranscriptError(TotalRecallError):
    """A transcript could not be read."""


class TranscriptRefused(TranscriptError):
    """A file that must not be read as a transcript: not a regular file, or not where the path
    rule allows (`reason` says which, as trust.refusal does)."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"cannot open transcript {path}: {reason}")
        self.reason = reason


class TransientError(TotalRecallError):
    """A failure worth retrying (endpoint down, database locked, disk full)."""


class StoreUnreachable(TransientError):
    """The PostgreSQL store did not answer; the message never holds its password."""


class ExtractionError(TotalRecallError):
    """The extraction endpoint gave an unusable answer."""


class EmbeddingError(TotalRecallError):
    """The embedding backend failed."""


class NotFound(TotalRecallError):
    """A memory, session or project the user named does not exist."""


class Ambiguous(NotFound):
    """A short name the user typed (a session id's prefix, a part of a title) names more than one."""
