#!/bin/bash
# Entrypoint of the local sqltally/mysql and sqltally/mariadb images (built by scripts/docker-stage.sh from the
# provisioned root filesystems). It honours the official images' environment so @testcontainers/mysql and
# @testcontainers/mariadb work unchanged:
#   MYSQL_ROOT_PASSWORD | MYSQL_ALLOW_EMPTY_PASSWORD | MYSQL_RANDOM_ROOT_PASSWORD, MYSQL_DATABASE, MYSQL_USER,
#   MYSQL_PASSWORD, MYSQL_ROOT_HOST; on MariaDB the MARIADB_* names first (MARIADB_ALLOW_EMPTY_ROOT_PASSWORD,
#   MARIADB_RANDOM_ROOT_PASSWORD), falling back to MYSQL_* as the official MariaDB image does.
# Arguments starting with '-' are extra server options (e.g. --performance-schema=ON); `mysqld`/`mariadbd`
# as first argument is dropped; any other command is run as is.
#
# Unlike the official images no temporary server runs: the users and the database are created by an init
# file the server executes before it opens its port, so no client binary is needed in the image.
#
# SQLTALLY_ENTRYPOINT_DRY_RUN=1 prints the init SQL and the server command instead of running anything.
set -euo pipefail

FLAVOUR="${SQLTALLY_FLAVOUR:-mysql}"          # set by the image: mysql | mariadb
DATADIR="${SQLTALLY_DATADIR:-/var/lib/mysql}"
RUNDIR="${SQLTALLY_RUNDIR:-/run/mysqld}"
DRY_RUN="${SQLTALLY_ENTRYPOINT_DRY_RUN:-}"

case "$FLAVOUR" in
  mysql) SERVER=/usr/sbin/mysqld ;;
  mariadb) SERVER=/usr/sbin/mariadbd ;;
  *) echo "entrypoint: SQLTALLY_FLAVOUR must be mysql or mariadb, not '$FLAVOUR'" >&2; exit 2 ;;
esac

# MARIADB_<name> then MYSQL_<name> on MariaDB; MYSQL_<name> only on MySQL.
setting() {
  local mariadb="MARIADB_$1" mysql="MYSQL_$1"
  if [ "$FLAVOUR" = mariadb ] && [ -n "${!mariadb:-}" ]; then printf '%s' "${!mariadb}"; return; fi
  printf '%s' "${!mysql:-}"
}

# The official images' "allow empty" values are any non-empty string; MariaDB also names it ..._ROOT_PASSWORD.
allow_empty="$(setting ALLOW_EMPTY_PASSWORD)"
[ "$FLAVOUR" = mariadb ] && [ -z "$allow_empty" ] && allow_empty="$(setting ALLOW_EMPTY_ROOT_PASSWORD)"
random_root="$(setting RANDOM_ROOT_PASSWORD)"
root_password="$(setting ROOT_PASSWORD)"
root_host="$(setting ROOT_HOST)"; root_host="${root_host:-%}"
database="$(setting DATABASE)"
user="$(setting USER)"
password="$(setting PASSWORD)"

if [ "${1:-}" = mysqld ] || [ "${1:-}" = mariadbd ]; then shift; fi
if [ "$#" -gt 0 ] && [ "${1#-}" = "$1" ]; then
  exec "$@"
fi

if [ -z "$root_password" ] && [ -z "$allow_empty" ] && [ -z "$random_root" ]; then
  prefix=MYSQL; [ "$FLAVOUR" = mariadb ] && prefix=MARIADB
  echo "entrypoint: database is uninitialized and password option is not specified" >&2
  echo "  You need to specify one of ${prefix}_ROOT_PASSWORD, ${prefix}_ALLOW_EMPTY_PASSWORD and ${prefix}_RANDOM_ROOT_PASSWORD" >&2
  exit 1
fi
if [ -n "$random_root" ] && [ -z "$root_password" ]; then
  root_password="$(head -c 18 /dev/urandom | od -An -tx1 | tr -d ' \n')"
  echo "GENERATED ROOT PASSWORD: $root_password"
fi
if [ "$user" = root ]; then
  echo "entrypoint: ${FLAVOUR^^}_USER=root is not allowed; the root user is configured by the *_ROOT_PASSWORD settings" >&2
  exit 1
fi
if [ -n "$user" ] && [ -z "$password" ]; then
  echo "entrypoint: a user was named without a password (set the *_PASSWORD variable)" >&2
  exit 1
fi

sql_string() { local s="${1//\\/\\\\}"; printf "'%s'" "${s//\'/\'\'}"; }
sql_ident() { printf '`%s`' "${1//\`/\`\`}"; }

init_sql() {
  local pw; pw="$(sql_string "$root_password")"
  echo "ALTER USER 'root'@'localhost' IDENTIFIED BY $pw;"
  if [ "$root_host" != localhost ]; then
    echo "CREATE USER IF NOT EXISTS 'root'@$(sql_string "$root_host") IDENTIFIED BY $pw;"
    echo "ALTER USER 'root'@$(sql_string "$root_host") IDENTIFIED BY $pw;"
    echo "GRANT ALL PRIVILEGES ON *.* TO 'root'@$(sql_string "$root_host") WITH GRANT OPTION;"
  fi
  if [ -n "$database" ]; then
    echo "CREATE DATABASE IF NOT EXISTS $(sql_ident "$database");"
  fi
  if [ -n "$user" ]; then
    echo "CREATE USER IF NOT EXISTS $(sql_string "$user")@'%' IDENTIFIED BY $(sql_string "$password");"
    echo "ALTER USER $(sql_string "$user")@'%' IDENTIFIED BY $(sql_string "$password");"
    [ -n "$database" ] && echo "GRANT ALL PRIVILEGES ON $(sql_ident "$database").* TO $(sql_string "$user")@'%';"
  fi
  echo "FLUSH PRIVILEGES;"
}

server_args=(
  --no-defaults
  --user=root
  "--datadir=$DATADIR"
  "--socket=$RUNDIR/mysqld.sock"
  "--pid-file=$RUNDIR/mysqld.pid"
  "--init-file=$RUNDIR/init.sql"
  --port=3306
  # Inside the container the port must face the bridge; the engine publishes it on the host's loopback.
  --bind-address=0.0.0.0
  --skip-name-resolve
  --secure-file-priv=
)
[ "$FLAVOUR" = mysql ] && server_args+=(--mysqlx=OFF)
# Options from the container command come last, so they override the defaults above.
server_args+=("$@")

if [ -n "$DRY_RUN" ]; then
  echo "-- init.sql"
  init_sql
  echo "-- server"
  printf '%s\n' "$SERVER" "${server_args[@]}"
  exit 0
fi

mkdir -p "$RUNDIR"
if [ ! -d "$DATADIR/mysql" ]; then
  echo "entrypoint: initializing $FLAVOUR data directory $DATADIR"
  mkdir -p "$DATADIR"
  if [ "$FLAVOUR" = mysql ]; then
    # --initialize refuses a non-empty directory; a fresh volume may hold lost+found.
    "$SERVER" --no-defaults --initialize-insecure --user=root "--datadir=$DATADIR"
  else
    # mariadb-install-db needs my_print_defaults, absent from mariadb-server-core; it only feeds these scripts
    # to the server in bootstrap mode (one statement per line), which is done here directly.
    {
      printf '%s\n' 'CREATE DATABASE IF NOT EXISTS mysql;' 'USE mysql;' 'SET @auth_root_socket=NULL;'
      for f in mariadb_system_tables mariadb_performance_tables mariadb_system_tables_data maria_add_gis_sp_bootstrap mariadb_sys_schema; do
        cat "/usr/share/mariadb/$f.sql"
      done
    } | "$SERVER" --no-defaults --bootstrap --user=root "--datadir=$DATADIR" --log-warnings=0 --enforce-storage-engine= \
      --max-allowed-packet=8M --net-buffer-length=16K
  fi
fi
( umask 077; init_sql >"$RUNDIR/init.sql" )
echo "entrypoint: starting $SERVER ${*:-}"
exec "$SERVER" "${server_args[@]}"
