# Loopback ports for the nodes that test and bench scripts start (sourced,
# not run): chosen below the kernel's ephemeral range.
#
# A port that `bind(("127.0.0.1", 0))` or a random pick in 20000-50000
# finds free may lie in the ephemeral range
# (/proc/sys/net/ipv4/ip_local_port_range, 32768-60999 by default), where
# any outgoing connection (a client polling another node, pip, a browser)
# can take it between the script choosing it and the node binding it. CI
# failed so: "listener 127.0.0.1:43340: Address already in use". The
# kernel never gives an outgoing connection a port below that range, so a
# port chosen there stays free unless a process binds it on purpose; the
# same rule as crates/cli/tests/common/ports.rs. Callers still restart a
# node that did not come up on other ports (another script may have bound
# them on purpose).
#
#   source scripts/lib/ports.sh
#   pick_ports 3 && p=$picked_port     # p, p+1, p+2 free and not picked before

# The first port of the ephemeral range (32768 where unreadable).
ephemeral_low() {
  local low
  read -r low _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || low=32768
  echo "${low:-32768}"
}

# port_in_use PORT: true if something on 127.0.0.1 accepts on PORT.
port_in_use() { (exec 2>/dev/null 3<>"/dev/tcp/127.0.0.1/$1"); }

# Ports handed out by pick_ports in this shell (not reused, even if the
# node on them has not bound yet).
ports_picked=" "

# pick_ports N: sets picked_port to the first of N consecutive loopback
# ports, each free now, below the ephemeral range (from 10000; any range
# from 20000 if that range starts below 11000), none handed out before by
# this shell. Returns 1 after 500 tries.
pick_ports() {
  local n=$1 low p k ok
  low=$(ephemeral_low)
  local floor=10000 span
  if ((low < floor + 1000)); then floor=20000 low=60000; fi
  span=$((low - floor - n))
  picked_port=""
  for _ in $(seq 500); do
    p=$((floor + (RANDOM * 32768 + RANDOM) % span))
    ok=1
    for ((k = 0; k < n; k++)); do
      if [[ $ports_picked == *" $((p + k)) "* ]] || port_in_use "$((p + k))"; then ok=0; break; fi
    done
    if [[ $ok == 1 ]]; then
      for ((k = 0; k < n; k++)); do ports_picked+="$((p + k)) "; done
      picked_port=$p
      return 0
    fi
  done
  return 1
}
