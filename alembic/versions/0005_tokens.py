"""Access tokens.

One row per token ever created: its public id, the SHA-256 of the whole token (never the
token), its role and queue pattern. Revoking sets ``revoked_at`` and keeps the row, so
``jobq tokens list`` can still say what a revoked id was. Each replica re-reads the live
rows every half second (jobq.core.tokens), which is how a revocation reaches every replica
within a second; the table holds tens of rows, so the read costs nothing.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-03
"""

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("""
CREATE TABLE tokens (
    id          text PRIMARY KEY,
    name        text,
    role        text NOT NULL CONSTRAINT tokens_role_check CHECK (role IN ('producer', 'worker', 'admin')),
    queues      text NOT NULL DEFAULT '*',
    hash        text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    revoked_at  timestamptz
)""")


def downgrade() -> None:
    op.execute("DROP TABLE tokens")
