#!/usr/bin/env bash
# A real single-node Slurm cluster on this machine, with slurmdbd + MariaDB so that sacct works.
#
#   bash scripts/slurm-local.sh start    # install (apt, only what is missing) and start; idempotent
#   bash scripts/slurm-local.sh status   # exit 0 when sinfo and sacct both answer
#   bash scripts/slurm-local.sh stop     # stop the daemons this script started
#   bash scripts/slurm-local.sh start|stop|status --nodes 2   # the two-node cluster in network
#                                        # namespaces (scripts/slurm-local-2node.sh), beside this one
#   eval "$(bash scripts/slurm-local.sh env --nodes 2)"       # its clients (SLURM_CONF, PATH)
#
# Needs root and Debian/Ubuntu (apt). No systemd: munged, mariadbd (unix socket only, no TCP),
# slurmdbd, slurmctld and `slurmd -N localhost` are started by hand. The settings are the ones
# verified on these machines (shared/REFERENCE.md §6): proctrack/linuxproc, task/none,
# select/cons_tres with CR_Core (CR_Core_Memory makes every job take the whole node),
# SlurmdParameters=config_overrides (advertise more CPUs than exist), NodeName=localhost
# NodeAddr=127.0.0.1, accounting through slurmdbd, slurmdbd.conf mode 0600, and ALTER USER after
# CREATE USER IF NOT EXISTS (the latter keeps an old password).
#
# Environment knobs (defaults in brackets):
#   ROLLCLI_SLURM_CPUS [8]            CPUs the node advertises
#   ROLLCLI_SLURM_MEM_MB [64000]      RealMemory the node advertises
#   ROLLCLI_SLURM_MAX_ARRAY [1001]    MaxArraySize (Slurm's default, written out so it is visible)
#   ROLLCLI_SLURM_PARTITION [debug]   the (default) partition's name
set -euo pipefail

CPUS="${ROLLCLI_SLURM_CPUS:-8}"
MEM_MB="${ROLLCLI_SLURM_MEM_MB:-64000}"
MAX_ARRAY="${ROLLCLI_SLURM_MAX_ARRAY:-1001}"
PARTITION="${ROLLCLI_SLURM_PARTITION:-debug}"
CLUSTER="rollcli"
DB_USER="slurm"
DB_PASS="rollcli-local-slurm"
DB_NAME="slurm_acct_db"

CONF_DIR=/etc/slurm
LOG_DIR=/var/log/slurm
RUN_DIR=/run/rollcli-slurm          # pid files of the daemons this script started
SPOOL=/var/spool/slurm
DB_SOCKET=/run/mysqld/mysqld.sock
PACKAGES=(slurm-wlm munge mariadb-server slurmdbd)

log() { echo "[slurm-local] $*" >&2; }
die() { log "error: $*"; exit 1; }

need_root() {
  [ "$(id -u)" = 0 ] || die "must run as root (it installs packages and starts system daemons)"
}

install_missing() {
  local missing=()
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ "${#missing[@]}" = 0 ] && return 0
  command -v apt-get >/dev/null || die "apt-get not found; install ${missing[*]} by hand"
  log "installing ${missing[*]} (apt-get)"
  apt-get update -qq
  # policy-rc.d may refuse to start services: fine, this script starts them itself.
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
}

pid_alive() { # pid_alive NAME [DIR] -> 0 when the pid in DIR/NAME.pid (DIR: RUN_DIR) is alive
  local f="${2:-$RUN_DIR}/$1.pid"
  [ -s "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null
}

wait_for() { # wait_for SECONDS DESCRIPTION COMMAND...
  local limit=$1 what=$2
  shift 2
  local deadline=$((SECONDS + limit))
  until "$@" >/dev/null 2>&1; do
    [ "$SECONDS" -lt "$deadline" ] || die "$what did not come up within ${limit}s (logs in ${LOG_HINT:-$LOG_DIR})"
    sleep 0.2
  done
}

shared_settings() { # the slurm.conf lines both local clusters use (shared/REFERENCE.md §6)
  cat <<EOF
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SwitchType=switch/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
SchedulerType=sched/backfill
ReturnToService=2
JobRequeue=1
MaxArraySize=$MAX_ARRAY
MaxJobCount=20000
MinJobAge=300
KillWait=10
InactiveLimit=0
SlurmctldTimeout=60
SlurmdTimeout=120
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/slurmdbd
EOF
}

write_configs() {
  local host
  host="$(hostname -s)"
  mkdir -p "$CONF_DIR" "$LOG_DIR" "$RUN_DIR" "$SPOOL/ctld" "$SPOOL/d"
  cat >"$CONF_DIR/slurm.conf.new" <<EOF
# Written by rollcli scripts/slurm-local.sh: a single-node cluster for tests.
ClusterName=$CLUSTER
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$SPOOL/ctld
SlurmdSpoolDir=$SPOOL/d
SlurmctldPidFile=$RUN_DIR/slurmctld.pid
SlurmdPidFile=$RUN_DIR/slurmd.pid
SlurmctldLogFile=$LOG_DIR/slurmctld.log
SlurmdLogFile=$LOG_DIR/slurmd.log
$(shared_settings)
AccountingStorageHost=localhost
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$MEM_MB State=UNKNOWN
PartitionName=$PARTITION Nodes=localhost Default=YES MaxTime=INFINITE DefaultTime=7-00:00:00 State=UP OverSubscribe=NO
EOF
  mv "$CONF_DIR/slurm.conf.new" "$CONF_DIR/slurm.conf"
  chmod 0644 "$CONF_DIR/slurm.conf"
  # slurmdbd refuses a config readable by others: write it 0600 from the start.
  (
    umask 077
    cat >"$CONF_DIR/slurmdbd.conf.new" <<EOF
# Written by rollcli scripts/slurm-local.sh
AuthType=auth/munge
DbdHost=localhost
DbdAddr=127.0.0.1
SlurmUser=root
PidFile=$RUN_DIR/slurmdbd.pid
LogFile=$LOG_DIR/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=$DB_USER
StoragePass=$DB_PASS
StorageLoc=$DB_NAME
EOF
  )
  mv "$CONF_DIR/slurmdbd.conf.new" "$CONF_DIR/slurmdbd.conf"
  chmod 0600 "$CONF_DIR/slurmdbd.conf"
}

start_munge() {
  if munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then return 0; fi
  log "starting munged"
  mkdir -p /run/munge /var/log/munge /var/lib/munge
  chown munge:munge /run/munge /var/log/munge /var/lib/munge
  chmod 0755 /run/munge
  if [ ! -s /etc/munge/munge.key ]; then
    dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 status=none
  fi
  chown munge:munge /etc/munge/munge.key
  chmod 0400 /etc/munge/munge.key
  runuser -u munge -- /usr/sbin/munged --force
  wait_for 10 munged sh -c 'munge -n | unmunge'
}

db() { mariadb --protocol=socket --socket="$DB_SOCKET" -u root "$@"; }

start_mariadb() {
  if ! db -e 'SELECT 1' >/dev/null 2>&1; then
    log "starting mariadbd (unix socket only)"
    mkdir -p /run/mysqld
    chown mysql:mysql /run/mysqld
    if [ ! -d /var/lib/mysql/mysql ]; then
      mariadb-install-db --user=mysql --datadir=/var/lib/mysql >"$LOG_DIR/mariadb-install.log" 2>&1
    fi
    nohup /usr/sbin/mariadbd --user=mysql --datadir=/var/lib/mysql --skip-networking \
      --socket="$DB_SOCKET" --pid-file=/run/mysqld/mariadbd.pid \
      --innodb-buffer-pool-size=128M --innodb-lock-wait-timeout=900 >>"$LOG_DIR/mariadbd.log" 2>&1 &
    echo $! >"$RUN_DIR/mariadbd.pid"
    wait_for 60 mariadbd db -e 'SELECT 1'
  fi
  # CREATE USER IF NOT EXISTS keeps an old password: ALTER USER makes the configured one true.
  db <<EOF
CREATE DATABASE IF NOT EXISTS $DB_NAME;
CREATE USER IF NOT EXISTS '$DB_USER'@'localhost' IDENTIFIED BY '$DB_PASS';
ALTER USER '$DB_USER'@'localhost' IDENTIFIED BY '$DB_PASS';
GRANT ALL ON $DB_NAME.* TO '$DB_USER'@'localhost';
FLUSH PRIVILEGES;
EOF
}

start_slurmdbd() {
  pid_alive slurmdbd && sacctmgr -n list cluster >/dev/null 2>&1 && return 0
  log "starting slurmdbd"
  /usr/sbin/slurmdbd
  wait_for 30 slurmdbd sacctmgr -n list cluster
  # slurmctld registers a missing cluster itself, but adding it first removes a startup race.
  if ! sacctmgr -n -P list cluster format=cluster | grep -qx "$CLUSTER"; then
    sacctmgr -i add cluster "$CLUSTER" >/dev/null
  fi
}

start_slurmctld() {
  pid_alive slurmctld && scontrol ping >/dev/null 2>&1 && return 0
  log "starting slurmctld"
  /usr/sbin/slurmctld
  wait_for 30 slurmctld scontrol ping
}

node_ready() { sinfo -h -n localhost -o '%T' | grep -Eq '^(idle|mixed|allocated|completing)'; }

start_slurmd() {
  if ! pid_alive slurmd; then
    log "starting slurmd"
    /usr/sbin/slurmd -N localhost
  fi
  wait_for 30 "slurmd (node localhost)" node_ready
}

configs_changed() { # the running cluster was started with other settings
  [ -f "$RUN_DIR/config.sha" ] || return 0
  [ "$(cat "$CONF_DIR/slurm.conf" "$CONF_DIR/slurmdbd.conf" | sha256sum)" != "$(cat "$RUN_DIR/config.sha")" ]
}

cmd_start() {
  need_root
  install_missing
  mkdir -p "$RUN_DIR"
  local old_sha=""
  [ -f "$RUN_DIR/config.sha" ] && old_sha="$(cat "$RUN_DIR/config.sha")"
  write_configs
  local new_sha
  new_sha="$(cat "$CONF_DIR/slurm.conf" "$CONF_DIR/slurmdbd.conf" | sha256sum)"
  if [ -n "$old_sha" ] && [ "$old_sha" != "$new_sha" ]; then
    log "settings changed: restarting the Slurm daemons"
    stop_slurm_daemons
  fi
  start_munge
  start_mariadb
  start_slurmdbd
  start_slurmctld
  start_slurmd
  echo "$new_sha" >"$RUN_DIR/config.sha"
  cmd_status
}

stop_pidfile() { # stop_pidfile NAME [DIR]: TERM, wait, then KILL the process in DIR/NAME.pid
  local f="${2:-$RUN_DIR}/$1.pid" pid
  [ -s "$f" ] || return 0
  pid="$(cat "$f")"
  if kill -0 "$pid" 2>/dev/null; then
    log "stopping $1 (pid $pid)"
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$f"
}

stop_slurm_daemons() {
  stop_pidfile slurmd
  stop_pidfile slurmctld
  stop_pidfile slurmdbd
}

cmd_stop() {
  need_root
  stop_slurm_daemons
  if pid_alive slurmctld "$N2_RUN_DIR"; then # the two-node cluster shares munged and MariaDB
    log "the two-node cluster is running: munged and mariadbd stay up (stop it: $0 stop --nodes 2)"
    rm -f "$RUN_DIR/config.sha"
    return 0
  fi
  stop_pidfile mariadbd
  # munged keeps its own pid file; stop it only when this script's layout started it
  if [ -s /run/munge/munged.pid ]; then
    cp /run/munge/munged.pid "$RUN_DIR/munged.pid"
    stop_pidfile munged
  fi
  rm -f "$RUN_DIR/config.sha"
}

cmd_status() {
  local ok=0
  if timeout 5 sinfo -h -o '%P %a %l %D %T %c' 2>/dev/null | sed 's/^/sinfo: /'; then
    node_ready || { log "node localhost is not ready"; ok=1; }
  else
    log "sinfo does not answer (slurmctld down?)"
    ok=1
  fi
  if timeout 5 sacct -n -X -S now-1minute -o JobID >/dev/null 2>&1; then
    echo "sacct: ok"
  else
    log "sacct does not answer (slurmdbd or mariadbd down?)"
    ok=1
  fi
  timeout 5 scontrol show config 2>/dev/null | grep -E '^(MaxArraySize|SelectTypeParameters|ProctrackType)' || true
  return "$ok"
}

# shellcheck source=scripts/slurm-local-2node.sh
. "$(dirname "${BASH_SOURCE[0]}")/slurm-local-2node.sh"

# A shell that points its clients at the two-node cluster (`eval "$(... env --nodes 2)"`) must
# not steer this script: the real clients, and each mode's own config, whatever the caller set.
unset SLURM_CONF
PATH=$(printf '%s' "$PATH" | tr ':' '\n' | grep -vxF "$N2_RUN_DIR/bin" | paste -sd: -)

usage() { echo "usage: $0 start|stop|status|restart [--nodes 1|2] | env --nodes 2" >&2; exit 2; }

COMMAND="${1:-}"
NODES=1
[ "$#" -gt 0 ] && shift
while [ "$#" -gt 0 ]; do
  case "$1" in
    --nodes) NODES="${2:-}"; shift 2 || usage ;;
    --nodes=*) NODES="${1#--nodes=}"; shift ;;
    *) usage ;;
  esac
done
case "$NODES:$COMMAND" in
  1:start) cmd_start ;;
  1:stop) cmd_stop ;;
  1:status) cmd_status ;;
  1:restart) cmd_stop; cmd_start ;;
  2:start) n2_cmd_start ;;
  2:stop) n2_cmd_stop ;;
  2:status) n2_cmd_status ;;
  2:restart) n2_cmd_stop; n2_cmd_start ;;
  2:env) n2_cmd_env ;;
  *) usage ;;
esac
