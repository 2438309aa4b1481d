#!/bin/bash
# Entrypoint of the local sqltally/postgres image (built by scripts/docker-stage.sh from the embedded-postgres
# binaries). It honours the official image's environment so @testcontainers/postgresql works unchanged:
#   POSTGRES_PASSWORD (required unless POSTGRES_HOST_AUTH_METHOD=trust), POSTGRES_USER (default postgres),
#   POSTGRES_DB (default: the user), POSTGRES_INITDB_ARGS, POSTGRES_HOST_AUTH_METHOD, PGDATA.
# Arguments starting with '-' are extra server options (e.g. -c shared_preload_libraries=pg_stat_statements);
# `postgres` as first argument is dropped; any other command is run as is.
#
# The database is created in single-user mode, so no client and no temporary server are needed.
# SQLTALLY_ENTRYPOINT_DRY_RUN=1 prints the plan instead of running anything.
set -euo pipefail

PGBIN="${SQLTALLY_PGBIN:-/opt/postgresql/bin}"
export PGDATA="${PGDATA:-/var/lib/postgresql/data}"
OS_USER=postgres
DRY_RUN="${SQLTALLY_ENTRYPOINT_DRY_RUN:-}"

user="${POSTGRES_USER:-postgres}"
database="${POSTGRES_DB:-$user}"
password="${POSTGRES_PASSWORD:-}"
auth="${POSTGRES_HOST_AUTH_METHOD:-scram-sha-256}"

if [ "${1:-}" = postgres ]; then shift; fi
if [ "$#" -gt 0 ] && [ "${1#-}" = "$1" ]; then
  exec "$@"
fi

if [ -z "$password" ] && [ "$auth" != trust ]; then
  echo "entrypoint: Database is uninitialized and superuser password is not specified." >&2
  echo "  You must specify POSTGRES_PASSWORD to a non-empty value for the superuser," >&2
  echo "  or set POSTGRES_HOST_AUTH_METHOD=trust to allow all connections without a password." >&2
  exit 1
fi

sql_ident() { printf '"%s"' "${1//\"/\"\"}"; }

server_args=(-D "$PGDATA" -c "listen_addresses=*" -c port=5432 "$@")

if [ -n "$DRY_RUN" ]; then
  echo "-- initdb"
  echo "$PGBIN/initdb -D $PGDATA -U $user --auth-local=trust --auth-host=$auth ${POSTGRES_INITDB_ARGS:-}"
  echo "-- pg_hba"
  echo "host all all all $auth"
  if [ "$database" != postgres ]; then echo "-- single-user"; echo "CREATE DATABASE $(sql_ident "$database")"; fi
  echo "-- server"
  printf '%s\n' "$PGBIN/postgres" "${server_args[@]}"
  exit 0
fi

as_postgres() { runuser -u "$OS_USER" -- "$@"; }

if [ ! -s "$PGDATA/PG_VERSION" ]; then
  echo "entrypoint: initializing $PGDATA for user $user"
  mkdir -p "$PGDATA"
  chown "$OS_USER:$OS_USER" "$PGDATA"
  chmod 0700 "$PGDATA"
  pwfile=''
  if [ -n "$password" ]; then
    pwfile="$(mktemp)"
    printf '%s\n' "$password" >"$pwfile"
    chown "$OS_USER" "$pwfile"
  fi
  # shellcheck disable=SC2086 # POSTGRES_INITDB_ARGS is a word list by contract with the official image
  as_postgres "$PGBIN/initdb" -D "$PGDATA" -U "$user" ${pwfile:+"--pwfile=$pwfile"} --auth-local=trust \
    "--auth-host=$auth" -E UTF8 --locale=C ${POSTGRES_INITDB_ARGS:-} >/dev/null
  [ -n "$pwfile" ] && rm -f "$pwfile"
  echo "host all all all $auth" >>"$PGDATA/pg_hba.conf"
  if [ "$database" != postgres ]; then
    echo "CREATE DATABASE $(sql_ident "$database")" | as_postgres "$PGBIN/postgres" --single -D "$PGDATA" postgres >/dev/null
  fi
fi
echo "entrypoint: starting postgres ${*:-}"
exec runuser -u "$OS_USER" -- "$PGBIN/postgres" "${server_args[@]}"
