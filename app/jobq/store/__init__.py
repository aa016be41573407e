"""Storage: the tables, the named SQL, the connection pool and LISTEN/NOTIFY. PostgreSQL only."""
