#!/bin/sh
# The standby's command: on its first start, copy the primary (pg_basebackup -R writes
# standby.signal and primary_conninfo), then run PostgreSQL as a hot standby. The name in
# application_name is the one the primary's synchronous_standby_names waits for.
set -eu
if [ ! -s "$PGDATA/PG_VERSION" ]; then
    until pg_isready -h pg-primary -p 5432 -q; do sleep 1; done
    PGPASSWORD="$REPLICATION_PASSWORD" pg_basebackup -h pg-primary -p 5432 -U replicator \
        -D "$PGDATA" -R -X stream
    echo "primary_conninfo = 'host=pg-primary port=5432 user=replicator password=$REPLICATION_PASSWORD application_name=pg_standby'" \
        >> "$PGDATA/postgresql.auto.conf"
    chmod 700 "$PGDATA"
fi
# No synchronous_standby_names here: once promoted it is a primary alone, and one that
# waited for a standby of its own would hang every commit until one is attached.
exec postgres -c hot_standby=on -c wal_level=replica -c max_wal_senders=10
