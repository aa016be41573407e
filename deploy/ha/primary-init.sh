#!/bin/sh
# Run once by the postgres image's entrypoint, on the primary's first start (an empty data
# directory): the role the standby replicates as, and the pg_hba.conf line that lets it in
# (the image's own "host all all all" line does not cover replication connections).
set -eu
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
     -v password="$REPLICATION_PASSWORD" <<'SQL'
CREATE ROLE replicator WITH REPLICATION LOGIN PASSWORD :'password';
SQL
echo "host replication replicator all scram-sha-256" >> "$PGDATA/pg_hba.conf"
