#!/bin/sh
# hosts_agent.sh — the "ssh" of tests/hosts_mpi.sh: Open MPI's launcher calls it as
# `hosts_agent.sh [OPTIONS] HOST COMMAND...` (--mca plm_rsh_agent) and it runs COMMAND, as ssh
# would through the remote shell, in the network namespace of HOST (10.77.0.K is the namespace
# ${CNNC_HOSTS_NS}hK, made by the test) under the host name hostK, in a UTS namespace of its own.
# The test starts mpirun itself in host 1 the same way. It reaches no other machine and makes no
# namespace: it only enters the ones the test made.
set -eu
while [ $# -gt 0 ]; do
  case $1 in
    -*) shift ;;
    *) break ;;
  esac
done
if [ $# -lt 2 ]; then
  echo "hosts_agent.sh: usage: hosts_agent.sh [OPTIONS] HOST COMMAND..." >&2
  exit 255
fi
case $1 in
  10.77.0.[1-9]) n=${1##*.} ;;
  *) echo "hosts_agent.sh: no namespace for host $1" >&2; exit 255 ;;
esac
shift
# shellcheck disable=SC2016 # expanded by the inner shell
exec ip netns exec "${CNNC_HOSTS_NS:?}h$n" unshare --uts \
  sh -c 'hostname "host$0" && exec sh -c "$1"' "$n" "$*"
