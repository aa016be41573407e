"""Who may do what: roles, queue patterns, the caller of a request, and the token format.

A token is ``jq_<id>_<secret>``: ``id`` is public (listed, revoked by it), ``secret`` is 256
random bits. Only the SHA-256 of the whole token is stored. A fast hash is enough for a
secret this long (nobody can guess 256 bits, however fast they hash); a slow password hash
would cost every request milliseconds for nothing.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from enum import StrEnum

from jobq.domain.rates import Bucket

TOKEN_PREFIX = "jq"
_ID_BYTES = 6  # 12 hex digits: enough never to collide in one deployment's token table
_SECRET_BYTES = 32
_TOKEN = re.compile(r"^jq_([0-9a-f]{12})_([A-Za-z0-9_\-]{43})$")
# The bootstrap admin token (JOBQ_ADMIN_TOKEN) is chosen by the operator: long enough that
# it cannot be guessed, printable so it fits a header.
MIN_ADMIN_TOKEN_LENGTH = 16
ADMIN_TOKEN_ALPHABET = re.compile(r"^[\x21-\x7e]+$")


class Role(StrEnum):
    PRODUCER = "producer"  # enqueues, and reads jobs of its queues
    WORKER = "worker"  # claims, heartbeats, acks, fails and releases
    ADMIN = "admin"  # everything


class QueuePattern:
    """One or more shell-style globs on the queue name, comma-separated: ``*`` any run of
    characters, ``?`` one character, ``[abc]``, ``[a-z]`` and ``[!abc]`` one of a set.
    Everything else matches itself. ``*`` alone is every queue.

    The same pattern is matched here (a queue a request names) and in PostgreSQL (jobs and
    queues a request reads or changes by id), so it compiles to a regular expression both
    understand: anchored, literals escaped, only ``.``, ``.*``, ``(?:|)`` and brackets."""

    __slots__ = ("text", "regex", "_match")

    def __init__(self, text: str) -> None:
        globs = [g.strip() for g in text.split(",")]
        if not text.strip() or any(not g for g in globs):
            raise ValueError("a queue pattern is one or more globs separated by commas")
        self.text = ",".join(globs)
        self.regex = "^(?:" + "|".join(_glob_regex(g) for g in globs) + ")$"
        try:
            self._match = re.compile(self.regex).match
        except re.error as exc:  # a ValueError is what callers (and the API's 422) expect
            raise ValueError(f"not a usable queue pattern: {exc}") from None

    @property
    def is_all(self) -> bool:
        return self.text == "*"

    def matches(self, queue: str) -> bool:
        return self._match(queue) is not None

    def __repr__(self) -> str:
        return f"QueuePattern({self.text!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, QueuePattern) and other.text == self.text

    def __hash__(self) -> int:
        return hash(self.text)


def _glob_regex(glob: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(glob):
        c = glob[i]
        i += 1
        if c == "*":
            out.append(".*")
        elif c == "?":
            out.append(".")
        elif c == "[":
            # As in fnmatch, a "]" first in the set (after "[" or "[!") is a member.
            start = i + 1 if glob[i:i + 1] == "!" else i
            start = start + 1 if glob[start:start + 1] == "]" else start
            end = glob.find("]", start)
            if end < 0:
                out.append(_escape(c))  # a lone "[" matches itself, as in fnmatch
                continue
            body = glob[i:end]
            i = end + 1
            negate = body.startswith("!")
            if negate:
                body = body[1:]
            out.append(f"[{'^' if negate else ''}{_members(body)}]")
        elif _plain(c):
            out.append(c)
        else:
            out.append(_escape(c))
    return "".join(out)


def _members(body: str) -> str:
    """A set's members: ``x-y`` ranges and single characters. A "-" that ends no range is
    escaped like any other character: PostgreSQL refuses ``[a-c-e]``, which Python reads."""
    out: list[str] = []
    k = 0
    while k < len(body):
        if k + 2 < len(body) and body[k + 1] == "-":
            lo, hi = body[k], body[k + 2]
            if lo > hi:
                raise ValueError(f"the range {lo}-{hi} of a queue pattern is out of order")
            out.append(f"{_member(lo)}-{_member(hi)}")
            k += 3
        else:
            out.append(_member(body[k]))
            k += 1
    return "".join(out)


def _member(c: str) -> str:
    return c if _plain(c) else _escape(c)


def _plain(c: str) -> bool:
    return c.isascii() and c.isalnum()


def _escape(c: str) -> str:
    """A character by its code point, in the escape Python's re and PostgreSQL's advanced
    regular expressions read alike (``\\x`` would not do: PostgreSQL reads every hex digit
    that follows it, so ``\\x2ea`` is one character there and two in Python)."""
    n = ord(c)
    return f"\\u{n:04x}" if n <= 0xFFFF else f"\\U{n:08x}"


ALL_QUEUES = QueuePattern("*")


@dataclass(frozen=True, slots=True)
class Principal:
    """The caller of one request: a token's role and queues, or the local mode's anyone."""

    token_id: str | None  # None: local mode, or the bootstrap JOBQ_ADMIN_TOKEN
    role: Role
    queues: QueuePattern
    enqueue_rate: Bucket | None = None  # the token's own rate of enqueues (issue 29)

    def may(self, roles: frozenset[Role]) -> bool:
        return self.role is Role.ADMIN or self.role in roles

    def sees(self, queue: str) -> bool:
        return self.queues.is_all or self.queues.matches(queue)

    @property
    def scope_regex(self) -> str | None:
        """The queue condition for SQL: None when every queue is in scope."""
        return None if self.queues.is_all else self.queues.regex


LOCAL = Principal(token_id=None, role=Role.ADMIN, queues=ALL_QUEUES)
BOOTSTRAP_ADMIN = Principal(token_id=None, role=Role.ADMIN, queues=ALL_QUEUES)


def new_token() -> tuple[str, str]:
    """A fresh token's ``(id, whole token)``."""
    token_id = secrets.token_hex(_ID_BYTES)
    return token_id, f"{TOKEN_PREFIX}_{token_id}_{secrets.token_urlsafe(_SECRET_BYTES)}"


def token_id_of(token: str) -> str | None:
    """The id of a well-formed token, None for anything else."""
    m = _TOKEN.match(token)
    return m.group(1) if m else None


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def same_secret(presented: str, expected: str) -> bool:
    """Constant-time: how long a comparison takes says nothing about how much matched."""
    return hmac.compare_digest(presented.encode(), expected.encode())
