# Sourced by .ci/run: start_postgres starts a throwaway PostgreSQL cluster
# (Debian's postgresql package, installed when missing) in a temporary
# directory on a free loopback port, and exports
#   CARMY_POSTGRES_URL      the URL of its database "carmy"
#   CARMY_POSTGRES_RESTART  a command that restarts it (fast shutdown, then
#                           start), for the tests that restart the database
# stop_postgres stops it and removes the directory.
# initdb refuses to run as root: as root, the cluster belongs to the
# "postgres" user the package creates.

pg_bin() {
  local d
  for d in /usr/lib/postgresql/*/bin; do
    [ -x "$d/initdb" ] && { echo "$d"; return; }
  done
}

start_postgres() {
  if [ -z "$(pg_bin)" ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
  fi
  local bin port run_as
  bin=$(pg_bin)
  [ -n "$bin" ] || { echo "PostgreSQL did not install"; return 1; }
  port=
  # Below Linux's ephemeral range (32768-60999): a restart binds the port
  # again, and a port in that range may meanwhile be some connection's
  # source port, which makes the restart fail.
  for p in $(seq 25432 25450); do # the first port where nothing listens
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then port=$p; break; fi
  done
  [ -n "$port" ] || { echo "ports 25432-25450 are all taken"; return 1; }
  PG_DIR=$(mktemp -d)
  run_as=()
  if [ "$(id -u)" = 0 ]; then
    chown postgres "$PG_DIR"
    run_as=(runuser -u postgres --)
  fi
  "${run_as[@]}" "$bin/initdb" -D "$PG_DIR/data" -U carmy --auth=trust -E UTF8 >"$PG_DIR/initdb.log" 2>&1 ||
    { cat "$PG_DIR/initdb.log"; return 1; }
  # fsync off: the tests check what carmy does, not the disk's durability.
  local opts="-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$PG_DIR -c fsync=off -c max_connections=200"
  "${run_as[@]}" "$bin/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/postgres.log" -o "$opts" -w start >/dev/null ||
    { cat "$PG_DIR/postgres.log"; return 1; }
  "${run_as[@]}" "$bin/createdb" -h 127.0.0.1 -p "$port" -U carmy carmy
  PG_CTL=("${run_as[@]}" "$bin/pg_ctl" -D "$PG_DIR/data")
  export CARMY_POSTGRES_URL="postgres://carmy@127.0.0.1:$port/carmy?sslmode=disable"
  export CARMY_POSTGRES_RESTART="${PG_CTL[*]} -l $PG_DIR/postgres.log -o '$opts' -m fast -w restart"
}

stop_postgres() {
  if [ -n "${PG_DIR:-}" ]; then
    "${PG_CTL[@]}" -m immediate stop >/dev/null 2>&1 || true
    rm -rf "$PG_DIR"
  fi
}
