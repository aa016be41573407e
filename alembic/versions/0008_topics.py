"""Fan-out topics: which queues each topic's publishes go to.

A topic is nothing but its subscriptions: one row per (topic, queue), with an optional job
``type`` that replaces the published one for that queue. ``POST /v1/topics/{topic}/publish``
reads a topic's rows (the primary key's prefix) and enqueues one job per row in one
transaction (jobq.core.topics). The queue must exist (every queue row does once it is named;
queues are never deleted), so a subscription cannot point at nothing.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-04
"""

from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("""
CREATE TABLE topic_subscriptions (
    topic       text NOT NULL,
    queue       text NOT NULL REFERENCES queues (name),
    type        text,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (topic, queue)
)""")


def downgrade() -> None:
    op.execute("DROP TABLE topic_subscriptions")
