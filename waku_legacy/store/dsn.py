"""PostgreSQL connection strings as they may be shown: without their password."""

from __future__ import annotations

__all__ = ["redact_dsn"]


def redact_dsn(dsn: str) -> str:
    """The DSN (URL or key=value form) with its password replaced by ``***``, for errors,
    logs and reports; ``<dsn>`` when it does not parse, since it may still hold a secret."""
    try:
        from psycopg.conninfo import conninfo_to_dict, make_conninfo

        params = conninfo_to_dict(dsn)
        if "password" in params:
            params["password"] = "***"
        return make_conninfo("", **params)
    except Exception:  # any parse failure: show nothing of it rather than a secret
        return "<dsn>"
