#!/bin/bash
# Run once by the postgres image when it creates the database: a role for
# Grafana that may only read. The scheduler creates the tables and views
# later (its migrations), as normsweep; default privileges cover them.
set -euo pipefail
: "${NORMSWEEP_GRAFANA_DB_PASSWORD:?}"
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
  -v grafana_password="$NORMSWEEP_GRAFANA_DB_PASSWORD" <<'SQL'
CREATE ROLE grafana LOGIN PASSWORD :'grafana_password';
GRANT CONNECT ON DATABASE normsweep TO grafana;
GRANT USAGE ON SCHEMA public TO grafana;
GRANT SELECT ON ALL TABLES IN SCHEMA public TO grafana;
ALTER DEFAULT PRIVILEGES FOR ROLE normsweep IN SCHEMA public GRANT SELECT ON TABLES TO grafana;
SQL
