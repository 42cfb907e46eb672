# shellcheck shell=bash
# The two-node mode of scripts/slurm-local.sh (`start|stop|status|env --nodes 2`); sourced by it,
# it reuses its helpers (log, die, wait_for, start_munge, start_mariadb, db, pid_alive, ...).
#
# Two "nodes" on this one machine: two network namespaces joined by one veth pair, each holding
# only its end of the pair (no route, bridge or address towards the host's interfaces), its own
# /etc/hosts (ip netns exec binds /etc/netns/<ns>/hosts over /etc/hosts) and its own hostname
# (a UTS namespace per daemon). Node 1 runs slurmctld, slurmdbd and a slurmd; node 2 a slurmd.
# The cluster lives beside the one-node cluster without touching it: its own ClusterName, config
# directory (clients point SLURM_CONF at it), ports, state, spool, log and pid directories, and
# accounting database; it shares munged (a unix socket) and the MariaDB server (its unix socket).
# Clients on the host reach the controller through small wrappers in $N2_RUN_DIR/bin that run the
# real command inside node 1's network namespace (`eval "$(slurm-local.sh env --nodes 2)"`).
#
# Knobs: ROLLCLI_SLURM2_NET [10.213.7] (the pair's /30 prefix), ROLLCLI_SLURM2_CPUS [8] CPUs and
# ROLLCLI_SLURM2_GPUS [1] fake GPUs (a GRES count without device files) each node advertises.

N2_CLUSTER=rollcli2n
N2_CONF_DIR=/etc/slurm-rollcli2n
N2_CONF="$N2_CONF_DIR/slurm.conf"
N2_LOG_DIR=/var/log/slurm-rollcli2n
N2_RUN_DIR=/run/rollcli-slurm-2n
N2_SPOOL=/var/spool/slurm-rollcli2n
N2_DB_NAME=slurm_acct_db_rollcli2n
N2_NET="${ROLLCLI_SLURM2_NET:-10.213.7}"
N2_CPUS="${ROLLCLI_SLURM2_CPUS:-8}"
N2_GPUS="${ROLLCLI_SLURM2_GPUS:-1}"
N2_MEM_MB="${ROLLCLI_SLURM2_MEM_MB:-32000}"
N2_HOSTS=(rcnode1 rcnode2)
N2_NS=(rollcli-node1 rollcli-node2)
N2_VETH=(rcli-veth1 rcli-veth2)
N2_CTLD_PORT=6917
N2_SLURMD_PORT=6918
N2_DBD_PORT=6919
N2_SRUN_PORTS=60001-63000 # outside Ray's range (20000-41399): a firewall test can block Ray only
N2_CLIENTS=(sbatch srun salloc squeue sacct scontrol scancel sinfo sacctmgr sstat sprio sshare)

n2_addr() { echo "$N2_NET.$(($1 + 1))"; }

n2_unavailable() { # the reason the cluster cannot run here, kept for the tests' skip message
  mkdir -p "$N2_RUN_DIR"
  echo "$*" >"$N2_RUN_DIR/unavailable"
  die "two-node cluster unavailable: $*"
}

n2_client() { # a Slurm client command of this cluster, from node 1's network namespace
  nsenter --net="/run/netns/${N2_NS[0]}" -- env SLURM_CONF="$N2_CONF" "$@"
}

n2_on_node() { # n2_on_node I CMD...: CMD on node I (its netns, /etc/hosts and hostname)
  # Not `ip netns exec`: it remounts /sys, which hides the cgroup mount slurmd needs. A private
  # mount namespace binds the node's hosts file over /etc/hosts; a UTS namespace its hostname.
  local i=$1
  shift
  nsenter --net="/run/netns/${N2_NS[$i]}" -- unshare --mount --propagation slave --uts -- \
    sh -c 'mount --bind "$0" /etc/hosts && hostname "$1" && shift && exec "$@"' \
    "/etc/netns/${N2_NS[$i]}/hosts" "${N2_HOSTS[$i]}" env SLURM_CONF="$N2_CONF" "$@"
}

n2_has_ns() { ip netns list 2>/dev/null | awk '{print $1}' | grep -qx "$1"; }

n2_netns_up() {
  local i out
  command -v ip >/dev/null || n2_unavailable "the ip command (iproute2) is missing"
  for i in 0 1; do
    if ! n2_has_ns "${N2_NS[$i]}"; then
      out=$(ip netns add "${N2_NS[$i]}" 2>&1) || n2_unavailable "ip netns add ${N2_NS[$i]}: $out"
      log "created network namespace ${N2_NS[$i]}"
    fi
    ip -n "${N2_NS[$i]}" link set lo up
  done
  if ! ip -n "${N2_NS[0]}" link show "${N2_VETH[0]}" >/dev/null 2>&1 ||
    ! ip -n "${N2_NS[1]}" link show "${N2_VETH[1]}" >/dev/null 2>&1; then
    ip -n "${N2_NS[0]}" link del "${N2_VETH[0]}" 2>/dev/null || true # half a pair
    ip -n "${N2_NS[1]}" link del "${N2_VETH[1]}" 2>/dev/null || true
    # created with each end already inside its namespace: it never exists on the host
    out=$(ip link add "${N2_VETH[0]}" netns "${N2_NS[0]}" type veth \
      peer name "${N2_VETH[1]}" netns "${N2_NS[1]}" 2>&1) || n2_unavailable "veth pair: $out"
    log "created veth pair ${N2_VETH[0]} <-> ${N2_VETH[1]}"
  fi
  for i in 0 1; do
    ip -n "${N2_NS[$i]}" addr replace "$(n2_addr "$i")/30" dev "${N2_VETH[$i]}"
    ip -n "${N2_NS[$i]}" link set "${N2_VETH[$i]}" up
    mkdir -p "/etc/netns/${N2_NS[$i]}"
    printf '127.0.0.1 localhost\n::1 localhost\n%s %s\n%s %s\n' \
      "$(n2_addr 0)" "${N2_HOSTS[0]}" "$(n2_addr 1)" "${N2_HOSTS[1]}" \
      >"/etc/netns/${N2_NS[$i]}/hosts.new"
    mv "/etc/netns/${N2_NS[$i]}/hosts.new" "/etc/netns/${N2_NS[$i]}/hosts"
  done
  out=$(ip netns exec "${N2_NS[1]}" getent hosts "${N2_HOSTS[0]}" 2>&1) || true
  [ "${out%% *}" = "$(n2_addr 0)" ] ||
    n2_unavailable "node 2 does not resolve ${N2_HOSTS[0]} through /etc/netns (got '$out')"
  out=$(ip netns exec "${N2_NS[0]}" unshare --uts -- sh -c 'hostname rcprobe && hostname' 2>&1) ||
    n2_unavailable "a UTS namespace (unshare --uts) cannot be made: $out"
}

n2_write_configs() {
  mkdir -p "$N2_CONF_DIR" "$N2_LOG_DIR" "$N2_RUN_DIR" "$N2_SPOOL/ctld"
  local h1=${N2_HOSTS[0]} h2=${N2_HOSTS[1]} a1 a2
  a1=$(n2_addr 0)
  a2=$(n2_addr 1)
  cat >"$N2_CONF.new" <<EOF
# Written by rollcli scripts/slurm-local.sh --nodes 2: a two-node cluster in network namespaces.
ClusterName=$N2_CLUSTER
SlurmctldHost=$h1($a1)
SlurmctldPort=$N2_CTLD_PORT
SlurmdPort=$N2_SLURMD_PORT
SrunPortRange=$N2_SRUN_PORTS
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$N2_SPOOL/ctld
SlurmdSpoolDir=$N2_SPOOL/d-%n
SlurmctldPidFile=$N2_RUN_DIR/slurmctld.pid
SlurmdPidFile=$N2_RUN_DIR/slurmd-%n.pid
SlurmctldLogFile=$N2_LOG_DIR/slurmctld.log
SlurmdLogFile=$N2_LOG_DIR/slurmd-%n.log
$(shared_settings)
GresTypes=gpu
AccountingStorageHost=$a1
AccountingStoragePort=$N2_DBD_PORT
NodeName=$h1 NodeAddr=$a1 CPUs=$N2_CPUS RealMemory=$N2_MEM_MB Gres=gpu:$N2_GPUS State=UNKNOWN
NodeName=$h2 NodeAddr=$a2 CPUs=$N2_CPUS RealMemory=$N2_MEM_MB Gres=gpu:$N2_GPUS State=UNKNOWN
PartitionName=debug Nodes=$h1,$h2 Default=YES MaxTime=INFINITE DefaultTime=7-00:00:00 State=UP OverSubscribe=NO
EOF
  mv "$N2_CONF.new" "$N2_CONF"
  chmod 0644 "$N2_CONF"
  # fake GPUs, so that --gpus-per-node=N schedules as on a GPU cluster: Slurm's gpu GRES wants
  # one device file per GPU, and empty regular files stand in for /dev/nvidia*
  mkdir -p "$N2_SPOOL/fake-gpu"
  local g files=""
  for ((g = 0; g < N2_GPUS; g++)); do
    : >"$N2_SPOOL/fake-gpu/gpu$g"
    files+="${files:+,}$N2_SPOOL/fake-gpu/gpu$g"
  done
  printf 'AutoDetect=off\nNodeName=%s,%s Name=gpu File=%s\n' "$h1" "$h2" "$files" \
    >"$N2_CONF_DIR/gres.conf"
  (
    umask 077
    cat >"$N2_CONF_DIR/slurmdbd.conf.new" <<EOF
# Written by rollcli scripts/slurm-local.sh --nodes 2
AuthType=auth/munge
DbdHost=$h1
DbdAddr=$a1
DbdPort=$N2_DBD_PORT
SlurmUser=root
PidFile=$N2_RUN_DIR/slurmdbd.pid
LogFile=$N2_LOG_DIR/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=$DB_USER
StoragePass=$DB_PASS
StorageLoc=$N2_DB_NAME
EOF
  )
  mv "$N2_CONF_DIR/slurmdbd.conf.new" "$N2_CONF_DIR/slurmdbd.conf"
  chmod 0600 "$N2_CONF_DIR/slurmdbd.conf"
}

n2_config_sha() { cat "$N2_CONF" "$N2_CONF_DIR/gres.conf" "$N2_CONF_DIR/slurmdbd.conf" | sha256sum; }

n2_write_clients() { # wrappers: the real client, inside node 1's netns unless already on a node
  mkdir -p "$N2_RUN_DIR/bin"
  local cmd real
  for cmd in "${N2_CLIENTS[@]}"; do
    real=$(command -v "$cmd") || continue
    cat >"$N2_RUN_DIR/bin/$cmd.new" <<EOF
#!/bin/sh
# Written by rollcli scripts/slurm-local.sh --nodes 2: $cmd of the two-node test cluster.
export SLURM_CONF=$N2_CONF
here=\$(stat -L -c %i /proc/self/ns/net)
for ns in ${N2_NS[*]}; do
  [ "\$here" = "\$(stat -L -c %i /run/netns/\$ns 2>/dev/null)" ] && exec $real "\$@"
done
exec nsenter --net=/run/netns/${N2_NS[0]} -- $real "\$@"
EOF
    chmod 0755 "$N2_RUN_DIR/bin/$cmd.new"
    mv "$N2_RUN_DIR/bin/$cmd.new" "$N2_RUN_DIR/bin/$cmd"
  done
  printf 'SLURM_CONF=%s\nROLLCLI_SLURM2_BIN=%s\nNODES=%s\nADDRESSES=%s\nNAMESPACES=%s\n' \
    "$N2_CONF" "$N2_RUN_DIR/bin" "${N2_HOSTS[*]}" "$(n2_addr 0) $(n2_addr 1)" "${N2_NS[*]}" \
    >"$N2_RUN_DIR/env.new"
  mv "$N2_RUN_DIR/env.new" "$N2_RUN_DIR/env"
}

n2_start_slurmdbd() {
  db <<EOF
CREATE DATABASE IF NOT EXISTS $N2_DB_NAME;
GRANT ALL ON $N2_DB_NAME.* TO '$DB_USER'@'localhost';
FLUSH PRIVILEGES;
EOF
  if ! { pid_alive slurmdbd "$N2_RUN_DIR" && n2_client sacctmgr -n list cluster >/dev/null 2>&1; }; then
    log "starting slurmdbd on ${N2_HOSTS[0]}"
    n2_on_node 0 /usr/sbin/slurmdbd
    wait_for 30 "slurmdbd (${N2_HOSTS[0]})" n2_client sacctmgr -n list cluster
  fi
  if ! n2_client sacctmgr -n -P list cluster format=cluster | grep -qx "$N2_CLUSTER"; then
    n2_client sacctmgr -i add cluster "$N2_CLUSTER" >/dev/null
  fi
}

n2_start_slurmctld() {
  pid_alive slurmctld "$N2_RUN_DIR" && n2_client scontrol ping >/dev/null 2>&1 && return 0
  log "starting slurmctld on ${N2_HOSTS[0]}"
  n2_on_node 0 /usr/sbin/slurmctld
  wait_for 30 "slurmctld (${N2_HOSTS[0]})" n2_client scontrol ping
}

n2_node_ready() { # n2_node_ready HOST
  n2_client sinfo -h -n "$1" -o '%T' | grep -Eq '^(idle|mixed|allocated|completing)$' # '*': not responding
}

n2_start_slurmd() {
  local i
  for i in 0 1; do
    mkdir -p "$N2_SPOOL/d-${N2_HOSTS[$i]}"
    if ! pid_alive "slurmd-${N2_HOSTS[$i]}" "$N2_RUN_DIR"; then
      log "starting slurmd on ${N2_HOSTS[$i]} ($(n2_addr "$i"))"
      n2_on_node "$i" /usr/sbin/slurmd -N "${N2_HOSTS[$i]}"
    fi
  done
  for i in 0 1; do
    wait_for 10 "slurmd (node ${N2_HOSTS[$i]}) registration" n2_node_registered "${N2_HOSTS[$i]}"
    # a drain recorded under earlier settings (the state is saved) must not outlive them
    if n2_client sinfo -h -n "${N2_HOSTS[$i]}" -o '%T' | grep -Eq '^(drain|drained|draining|inval)'; then
      log "resuming ${N2_HOSTS[$i]}, drained earlier: $(n2_client sinfo -h -n "${N2_HOSTS[$i]}" -o '%E')"
      n2_client scontrol update NodeName="${N2_HOSTS[$i]}" State=RESUME || true
    fi
    wait_for 60 "slurmd (node ${N2_HOSTS[$i]})" n2_node_ready "${N2_HOSTS[$i]}"
  done
}

n2_node_registered() { # slurmctld heard from the node's slurmd (whatever state it gave it)
  n2_client scontrol show node "$1" | grep -q 'SlurmdStartTime=[0-9]'
}

n2_any_daemon_alive() {
  local name
  for name in slurmdbd slurmctld "slurmd-${N2_HOSTS[0]}" "slurmd-${N2_HOSTS[1]}"; do
    pid_alive "$name" "$N2_RUN_DIR" && return 0
  done
  return 1
}

n2_stop_daemons() {
  stop_pidfile "slurmd-${N2_HOSTS[1]}" "$N2_RUN_DIR"
  stop_pidfile "slurmd-${N2_HOSTS[0]}" "$N2_RUN_DIR"
  stop_pidfile slurmctld "$N2_RUN_DIR"
  stop_pidfile slurmdbd "$N2_RUN_DIR"
}

n2_cmd_start() {
  need_root
  # nftables: the multi-node tests cut Ray's ports between the nodes with it (a firewall)
  PACKAGES+=(iproute2 nftables)
  install_missing
  LOG_HINT=$N2_LOG_DIR
  mkdir -p "$N2_RUN_DIR"
  rm -f "$N2_RUN_DIR/unavailable"
  n2_netns_up
  local old_sha="" new_sha
  [ -f "$N2_RUN_DIR/config.sha" ] && old_sha="$(cat "$N2_RUN_DIR/config.sha")"
  n2_write_configs
  new_sha="$(n2_config_sha)"
  if [ "$old_sha" != "$new_sha" ] && n2_any_daemon_alive; then
    log "two-node settings changed: restarting its Slurm daemons"
    n2_stop_daemons
  fi
  start_munge
  start_mariadb
  n2_start_slurmdbd
  n2_start_slurmctld
  n2_start_slurmd
  echo "$new_sha" >"$N2_RUN_DIR/config.sha"
  n2_write_clients
  n2_cmd_status
}

n2_cmd_stop() {
  need_root
  n2_stop_daemons
  local i pid
  for i in 0 1; do
    if n2_has_ns "${N2_NS[$i]}"; then
      # what is left inside are job processes of this cluster's nodes: end them, by id
      for pid in $(ip netns pids "${N2_NS[$i]}" 2>/dev/null); do
        log "stopping pid $pid left in ${N2_NS[$i]}"
        kill "$pid" 2>/dev/null || true
      done
      sleep 0.5
      for pid in $(ip netns pids "${N2_NS[$i]}" 2>/dev/null); do kill -9 "$pid" 2>/dev/null || true; done
      ip -n "${N2_NS[$i]}" link del "${N2_VETH[$i]}" 2>/dev/null || true
      ip netns del "${N2_NS[$i]}"
      log "removed network namespace ${N2_NS[$i]}"
    fi
    rm -rf "/etc/netns/${N2_NS[$i]}"
  done
  rm -rf "$N2_RUN_DIR/bin" "$N2_RUN_DIR/env" "$N2_RUN_DIR/config.sha"
}

n2_cmd_status() {
  local ok=0 i
  if [ ! -s "$N2_RUN_DIR/env" ]; then
    log "the two-node cluster is not running (start it: $0 start --nodes 2)"
    return 1
  fi
  if timeout 5 "$N2_RUN_DIR/bin/sinfo" -h -o '%P %a %l %D %T %N %G' 2>/dev/null | sed 's/^/sinfo: /'; then
    for i in 0 1; do
      n2_node_ready "${N2_HOSTS[$i]}" || { log "node ${N2_HOSTS[$i]} is not ready"; ok=1; }
    done
  else
    log "sinfo does not answer (the two-node slurmctld down?)"
    ok=1
  fi
  if timeout 5 "$N2_RUN_DIR/bin/sacct" -n -X -S now-1minute -o JobID >/dev/null 2>&1; then
    echo "sacct: ok"
  else
    log "sacct does not answer (the two-node slurmdbd or mariadbd down?)"
    ok=1
  fi
  echo "clients: eval \"\$($0 env --nodes 2)\""
  return "$ok"
}

n2_cmd_env() { # the client environment, for eval in a shell
  [ -s "$N2_RUN_DIR/env" ] || die "the two-node cluster is not running (start it: $0 start --nodes 2)"
  echo "export SLURM_CONF=$N2_CONF"
  echo "export PATH=$N2_RUN_DIR/bin:\$PATH"
}
