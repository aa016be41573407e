"""PostgreSQL for the tests: the server at JOBQ_TEST_DATABASE_URL, or a throwaway embedded one;
a template database migrated once per test process, and a fresh clone of it per test."""

from __future__ import annotations

import os
import uuid
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql


def with_database(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))


def admin_execute(admin_url: str, statement: sql.Composable | str) -> None:
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(statement)


def create_template(admin_url: str) -> str:
    from jobq.store.migrate import migrate

    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    name = f"jobq_template_{worker}_{uuid.uuid4().hex[:6]}"
    admin_execute(admin_url, sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    migrate(with_database(admin_url, name))
    return name


def clone(admin_url: str, template: str) -> str:
    name = f"jobq_test_{uuid.uuid4().hex[:12]}"
    admin_execute(
        admin_url,
        sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(sql.Identifier(name), sql.Identifier(template)),
    )
    return name


def drop(admin_url: str, name: str) -> None:
    admin_execute(admin_url, sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
