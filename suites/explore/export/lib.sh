# --- The helpers every exported script shares (suites/explore/export/lib.sh) ---------------
fill_sed() {  # a sed script putting each @PORT+n@ at PORT_BASE + n, each @ADDR+k@ at node k's
  local t o
  grep -ho '@PORT+[0-9]*@' "$HERE"/nodes/*/* | sort -u | while read -r t; do
    o=${t#@PORT+}; echo "s#$t#$((PORT_BASE + ${o%@}))#g;"
  done
  grep -ho '@ADDR+[0-9]*@' "$HERE"/nodes/*/* | sort -u | while read -r t; do
    o=${t#@ADDR+}; echo "s#$t#$(node_addr "${o%@}")#g;"
  done
}
log() { echo "[$(date +%H:%M:%S)] $*"; }
# Kafka's own tools, by the main class their bin/ script runs.
tool() { local main=$1; shift; java -Xmx256m -cp "$LIBS/*" "$main" "$@" 2>>"$WORK/tools.log"; }
# The JDK's Java shell with the release's jars: it takes no classpath wildcard, so each jar.
java_shell() { jshell -q -R-Xmx256m --class-path "$(ls "$LIBS"/*.jar | paste -sd: -)"; }
wait_until() {  # wait_until WHAT SECONDS COMMAND...: poll until COMMAND succeeds, or exit 3
  local what=$1 limit=$2; shift 2; local end=$((SECONDS + limit))
  until "$@"; do
    if ((SECONDS >= end)); then log "gave up after ${limit}s waiting for $what"; exit 3; fi
    sleep 0.5
  done
  log "$what"
}
start_node() {
  local n=$1 ns=()
  # A plain command, not the in_ns function: a function sent to the background runs in a
  # subshell, and $! would be the subshell's pid, not the broker's.
  if ((NETWORKED)); then ns=(nsenter "--net=/run/netns/$NS_PREFIX-$n" --); fi
  "${ns[@]}" java -Xmx384m -Xms64m -XX:+UseSerialGC "-D$LOG_PROPERTY=$LOG_PREFIX$WORK/$n/$LOG_CONFIG" \
    -cp "$LIBS/*" kafka.Kafka "$WORK/$n/server.properties" >"$WORK/$n/stdout.log" 2>&1 &
  PID[$n]=$!
}
stopped() { ! kill -0 "${PID[$1]}" 2>/dev/null; }
cleanup() {
  for n in "${!PID[@]}"; do kill -KILL "${PID[$n]}" 2>/dev/null || true; done
  wait 2>/dev/null || true
  remove_network
  log "every process stopped; the nodes' logs and data are in $WORK"
}
trap cleanup EXIT
# Interrupted (Ctrl-C, kill), the script exits, and its EXIT trap cleans up.
trap 'exit 130' INT TERM HUP

# --- a network namespace per node, where a step cuts or slows links (NETWORKED=1) ----------
# Node k is $NET.(10 + k) on a bridge whose host end is $NET.1 (the tools connect from
# there); without namespaces every node is 127.0.0.1.
NS_PREFIX=rp$PORT_BASE
BRIDGE=${NS_PREFIX}br
node_addr() { if ((NETWORKED)); then echo "$NET.$((10 + $1))"; else echo 127.0.0.1; fi; }
addr_of() { node_addr "${INDEX[$1]}"; }
id_of() { echo "${ID_OF[$1]}"; }
in_ns() {  # in_ns NODE COMMAND...: run it in the node's namespace (or plainly, without them)
  local n=$1; shift
  # nsenter execs the command in the namespace (ip netns exec forks it first)
  if ((NETWORKED)); then nsenter "--net=/run/netns/$NS_PREFIX-$n" -- "$@"; else "$@"; fi
}
ports_free() {  # on 127.0.0.1 the nodes' ports must be free: a socket there fails the bind
  local lo=$PORT_BASE hi=$((PORT_BASE + 10 * (${#INDEX[@]} + 1))) held
  held=$(ss -Htan "( sport >= :$lo and sport <= :$hi )" 2>/dev/null | head -3)
  if [ -n "$held" ]; then
    echo "ports $lo-$hi are in use on this machine (ss: $held): set PORT_BASE to a free range" >&2
    exit 2
  fi
}
make_network() {
  ((NETWORKED)) || { ports_free; return 0; }
  if [ "$(id -u)" != 0 ]; then
    echo "this script cuts links between nodes (ip netns, iptables, tc): run it as root" >&2
    exit 2
  fi
  local n
  ip link add "$BRIDGE" type bridge
  NETWORK_MADE=1
  ip addr add "$NET.1/24" dev "$BRIDGE"
  ip link set "$BRIDGE" up
  # Where br_netfilter is loaded (Docker loads it, and sets FORWARD's policy to DROP), what
  # the bridge forwards between two nodes passes the host's FORWARD chain.
  iptables -I FORWARD -i "$BRIDGE" -o "$BRIDGE" -m comment --comment "$NS_PREFIX" -j ACCEPT
  for n in $NODES; do
    ip netns add "$NS_PREFIX-$n"
    ip link add "$NS_PREFIX-${INDEX[$n]}" type veth peer name eth0 netns "$NS_PREFIX-$n"
    ip link set "$NS_PREFIX-${INDEX[$n]}" master "$BRIDGE" up
    ip -n "$NS_PREFIX-$n" addr add "$(addr_of "$n")/24" dev eth0
    ip -n "$NS_PREFIX-$n" link set eth0 up
    ip -n "$NS_PREFIX-$n" link set lo up
  done
}
remove_network() {
  [ -n "${NETWORK_MADE:-}" ] || return 0
  local n
  for n in $NODES; do
    # Whatever still runs in a namespace goes with it (nothing of the script outlives it).
    ip netns pids "$NS_PREFIX-$n" 2>/dev/null | xargs -r kill -KILL 2>/dev/null || true
    ip netns del "$NS_PREFIX-$n" 2>/dev/null || true
    ip link del "$NS_PREFIX-${INDEX[$n]}" 2>/dev/null || true
  done
  ip link del "$BRIDGE" 2>/dev/null || true
  iptables -D FORWARD -i "$BRIDGE" -o "$BRIDGE" -m comment --comment "$NS_PREFIX" -j ACCEPT \
    2>/dev/null || true
  NETWORK_MADE=
}
not_reached() { log "not reached: $*"; exit 3; }
reaches() {  # reaches A B SECONDS: a handshake from A to B's listener completes (or is refused)
  local out
  out=$(in_ns "$1" timeout "$3" bash -c "exec 3<>/dev/tcp/$(addr_of "$2")/$((PORT_BASE + LISTEN[$2]))" 2>&1) ||
    [[ $out == *"Connection refused"* ]]
}
peers() { if [ "$1" = quorum ]; then echo "$CONTROLLERS"; else echo "$1"; fi; }
rules() {  # rules -I|-D A B: DROP what A and B send each other, in A's namespace
  local p addr
  for p in $(peers "$3"); do
    addr=$(addr_of "$p")
    in_ns "$2" iptables "$1" INPUT -s "$addr" -j DROP
    in_ns "$2" iptables "$1" OUTPUT -d "$addr" -j DROP
  done
}
# Each link a step cut or slowed: "KIND A B"; a heal of every cut heals slow ones first.
LINKS=()
cut_link() {  # cut_link A B [session]: B may be "quorum"; session: heal awaits A's return
  local p
  rules -I "$1" "$2"
  for p in $(peers "$2"); do
    if reaches "$1" "$p" 0.5; then not_reached "cut $1 from $2 ($1 still reaches $p)"; fi
  done
  LINKS+=("${3:-cut} $1 $2")
  log "cut $1 from $2"
}
slow_link() {  # slow_link A B KBPS: shape what A sends B (an HTB class, on B's address)
  local rate=$(($3 * 8))kbit
  in_ns "$1" tc qdisc add dev eth0 root handle 1: htb default 10
  in_ns "$1" tc class add dev eth0 parent 1: classid 1:10 htb rate 10gbit
  in_ns "$1" tc class add dev eth0 parent 1: classid 1:20 htb rate "$rate" ceil "$rate"
  in_ns "$1" tc filter add dev eth0 parent 1: protocol ip prio 1 u32 \
    match ip dst "$(addr_of "$2")/32" flowid 1:20
  in_ns "$1" tc class show dev eth0 classid 1:20 | grep -q rate ||
    not_reached "slow $1 to $2 (tc shows no slow class)"
  LINKS+=("slow $1 $2")
  log "slowed $1 to $2 to $3 KB/s"
}
queued() {  # queued A B: bytes A has not yet sent B, and B has not yet read from A
  { in_ns "$1" ss -tnH dst "$(addr_of "$2")" | awk '{ n += $3 } END { print n + 0 }'
    in_ns "$2" ss -tnH dst "$(addr_of "$1")" | awk '{ n += $2 } END { print n + 0 }'; } |
    awk '{ n += $1 } END { exit n != 0 }'
}
lift() {  # lift "KIND A B": heal one link
  local kind a b p end
  read -r kind a b <<<"$1"
  case $kind in
    slow)
      in_ns "$a" tc qdisc del dev eth0 root
      # What the link held back arrives and is read before anything else heals.
      end=$((SECONDS + 10))
      until queued "$a" "$b" || ((SECONDS >= end)); do sleep 0.1; done ;;
    *)
      rules -D "$a" "$b"
      for p in $(peers "$b"); do
        stopped "$a" || stopped "$p" || reaches "$a" "$p" 60 ||
          not_reached "heal $a - $b ($a still cannot reach $p)"
      done
      if [ "$kind" = session ] && ! stopped "$a"; then
        wait_until "$a registered and unfenced again" 120 is_unfenced "$(id_of "$a")"
      fi ;;
  esac
  log "healed $kind $a - $b"
}
heal_link() {  # heal_link A B: the link between them, whichever way it was named
  local i kind a b
  for i in "${!LINKS[@]}"; do
    read -r kind a b <<<"${LINKS[$i]}"
    if [[ "$a $b" == "$1 $2" || "$a $b" == "$2 $1" ]]; then
      lift "${LINKS[$i]}"; unset 'LINKS[i]'; LINKS=("${LINKS[@]}"); return
    fi
  done
  echo "heal_link $1 $2: nothing cut between them" >&2; return 1
}
heal_all() {
  local link
  for link in "${LINKS[@]}"; do if [[ $link == slow* ]]; then lift "$link"; fi; done
  for link in "${LINKS[@]}"; do if [[ $link != slow* ]]; then lift "$link"; fi; done
  LINKS=()
}

# The metadata log of the first controller, as DumpLogSegments decodes it.
metadata_dump() {
  tool "$DUMP_LOG" --cluster-metadata-decoder --files \
    "$(ls "$WORK/$METADATA_NODE"/data/__cluster_metadata-0/*.log 2>/dev/null | paste -sd, -)"
}
# Fields of the JSON payloads DumpLogSegments prints, for awk.
AWK_FIELDS='
  function num(k,  m) { if (match($0, "\"" k "\":-?[0-9]+")) { m = substr($0, RSTART, RLENGTH)
    sub(/.*:/, "", m); return m + 0 } return -9 }
  function str(k,  m) { if (match($0, "\"" k "\":\"[^\"]*\"")) { m = substr($0, RSTART, RLENGTH)
    sub(/^[^:]*:"/, "", m); sub(/"$/, "", m); return m } return "" }
  function offset(  o) { o = $0; sub(/^.*offset: /, "", o); sub(/ .*/, "", o); return o }
  # fenced[b], as the records so far leave broker b (KIP-631 registrations and fencing)
  /"type":"REGISTER_BROKER_RECORD"/ { fenced[num("brokerId")] = ($0 ~ /"fenced":false/) ? 0 : 1 }
  /"type":"FENCE_BROKER_RECORD"/ { fenced[num("id")] = 1 }
  /"type":"UNFENCE_BROKER_RECORD"/ { fenced[num("id")] = 0 }
  /"type":"BROKER_REGISTRATION_CHANGE_RECORD"/ { f = num("fenced")
    if (f == 1) fenced[num("brokerId")] = 1; else if (f == -1) fenced[num("brokerId")] = 0 }
'
# The metadata log's last word on a broker: fenced, unfenced or unregistered.
broker_state() {
  metadata_dump | awk -v b="$1" "$AWK_FIELDS"'
    END { print (!(b in fenced) ? "unregistered" : fenced[b] ? "fenced" : "unfenced") }'
}
is_fenced() { [ "$(broker_state "$1")" = fenced ]; }
is_unfenced() { [ "$(broker_state "$1")" = unfenced ]; }
# Partition 0's leader, as the metadata log last recorded it (-1: none yet): an election is
# done once the controller has written it (KIP-631), whatever a broker's metadata says yet.
leader_of() {
  metadata_dump | awk -v topic="$TOPIC" "$AWK_FIELDS"'
    /"type":"TOPIC_RECORD"/ && str("name") == topic { id = str("topicId") }
    /"type":"PARTITION(_CHANGE)?_RECORD"/ && id != "" && str("topicId") == id &&
      num("partitionId") == 0 && num("leader") != -9 { leader = num("leader"); seen = 1 }
    END { print seen ? leader : -1 }'
}
has_leader() { (($(leader_of) >= 0)); }
leads() { [ "$(leader_of)" = "$1" ]; }
# The brokers a request the controller must answer can go through: running, not paused, and
# not cut off from the controllers by a step (a broker forwards it there, KIP-590).
PAUSED=" "
quorum_boot() {
  local n link out=()
  for n in $BROKER_NODES; do
    if stopped "$n" || [[ $PAUSED == *" $n "* ]]; then continue; fi
    for link in "${LINKS[@]}"; do if [[ $link == *" $n quorum" ]]; then continue 2; fi; done
    out+=("$(addr_of "$n"):$((PORT_BASE + LISTEN[$n]))")
  done
  local IFS=,
  echo "${out[*]:-$BOOT}"
}
# An election, asked again until the metadata log names LEADER: the Admin client sends it
# to a broker of its choosing, and one cut off from the controllers holds it until the
# client gives up; each try waits 5 s, as logfork's (faults.elections).
elect() {  # elect PREFERRED|UNCLEAN LEADER
  local end=$((SECONDS + 60))
  printf 'request.timeout.ms=5000\ndefault.api.timeout.ms=5000\n' >"$WORK/elect.properties"
  until leads "$2"; do
    if ((SECONDS >= end)); then not_reached "broker $2 elected leader of partition 0"; fi
    # "no election needed" and a timeout both exit non-zero: the metadata log decides.
    tool "$ELECT" --bootstrap-server "$(quorum_boot)" --admin.config "$WORK/elect.properties" \
      --election-type "$1" --topic "$TOPIC" --partition 0 >>"$WORK/elections.txt" || true
  done
  log "broker $2 elected leader of partition 0 ($1)"
}
pause_node() { kill -STOP "${PID[$1]}"; PAUSED+="$1 "; }
resume_node() { kill -CONT "${PID[$1]}"; PAUSED=${PAUSED/ $1 / }; }

# --- symptoms: each one found is a line in $WORK/symptoms ---------------------------------
symptom() { log "SYMPTOM: $*"; echo "$*" >>"$WORK/symptoms"; }
# fenced-leader (KAFKA-19522): the metadata log elects a broker it has itself fenced.
check_fenced_leaders() {
  metadata_dump >"$WORK/metadata-log.txt"
  awk -v topic="$TOPIC" "$AWK_FIELDS"'
    /"type":"TOPIC_RECORD"/ && str("name") == topic { id = str("topicId") }
    /"type":"PARTITION(_CHANGE)?_RECORD"/ && id != "" && str("topicId") == id {
      l = num("leader")
      if (l >= 0 && fenced[l]) printf "metadata log offset %s: partition %d of %s elected " \
        "broker %d, which the log has fenced\n", offset(), num("partitionId"), topic, l }
  ' "$WORK/metadata-log.txt" | while read -r line; do symptom "$line"; done
}
# A leader epoch lost in a swap (KAFKA-20961): every epoch in OLD's leader-epoch-checkpoint
# (version, count, then "epoch start-offset" lines) is in NEW's.
epochs_kept() {  # epochs_kept NEW OLD BROKER
  local lost new=$1
  [ -e "$new" ] || new=/dev/null
  # (FILENAME, not NR == FNR: an empty NEW is the very case to catch)
  lost=$(awk 'FILENAME == ARGV[1] { if (FNR > 2) have[$1] = 1; next }
    FNR > 2 && !($1 in have) { printf "%s ", $1 }' "$new" "$2")
  [ -z "$lost" ] || symptom "broker $3's replica, swapped in from its other log dir, lost" \
    "leader epoch(s) $lost: $(tail -n +3 "$2" | paste -sd' ') before," \
    "$(tail -n +3 "$new" | paste -sd' ') after"
}
# hanging-transaction (KAFKA-20716, KAFKA-20734): the partition still reports a transaction
# open (describe-producers: CurrentTransactionStartOffset, its last column, is an offset, not
# None or -1).
open_on() {
  tool "$TRANSACTIONS" --bootstrap-server "$BOOT" describe-producers --topic "$TOPIC" \
    --partition "$1" >"$WORK/producers-$1.txt" || return 0
  awk 'NR > 1 && $NF != -1 && $NF != "None" { open = 1 } END { exit !open }' "$WORK/producers-$1.txt"
}
check_closed() {  # check_closed PARTITION SECONDS
  local end=$((SECONDS + $2))
  until ! open_on "$1" || ((SECONDS >= end)); do sleep 0.5; done
  if open_on "$1"; then
    tool "$TRANSACTIONS" --bootstrap-server "$BOOT" describe \
      --transactional-id "$TRANSACTIONAL_ID" >"$WORK/transaction.txt" || true
    symptom "partition $1 of $TOPIC still has a transaction open $2 s after the heal" \
      "($(tail -1 "$WORK/producers-$1.txt" | awk '{print "producer " $1 ", from offset " $NF}'))," \
      "while its coordinator says $(awk 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "TransactionState") c = i }
        NR == 2 && c { print $c }' "$WORK/transaction.txt")"
  fi
}
dump_partition() {  # dump_partition NODE P: the node's replica as DumpLogSegments prints it
  local f
  for f in "$WORK/$1"/data*/"$TOPIC-$2"/*.log; do
    [ -e "$f" ] && tool "$DUMP_LOG" --files "$f" >>"$WORK/$1-partition-$2.txt"
  done
  return 0
}
# diverged (KAFKA-18723): two replicas hold different batches at an offset below the high
# watermark, which no replica may truncate: committed data differs. Read from each node's
# dump_partition (batch lines: baseOffset, lastOffset, partitionLeaderEpoch, crc) and the
# high watermarks the brokers checkpointed.
batches() {
  awk '/^baseOffset:/ { for (i = 1; i < NF; i++) v[$i] = $(i + 1)
    print v["baseOffset:"], v["lastOffset:"], v["partitionLeaderEpoch:"], v["crc:"] }' "$1"
}
check_replicas_agree() {  # check_replicas_agree P (after dump_partition P on every broker)
  local hw a b first o
  hw=$(cat "$WORK"/*/data*/replication-offset-checkpoint 2>/dev/null |
    awk -v t="$TOPIC" -v p="$1" '$1 == t && $2 == p && $3 > hw { hw = $3 } END { print hw + 0 }')
  for a in $BROKER_NODES; do
    for b in $BROKER_NODES; do
      [[ $a < $b && -s "$WORK/$a-partition-$1.txt" && -s "$WORK/$b-partition-$1.txt" ]] || continue
      # The first batch the two differ in, where both have one: its lower base offset.
      first=$(paste -d' ' <(batches "$WORK/$a-partition-$1.txt") <(batches "$WORK/$b-partition-$1.txt") |
        awk 'NF == 8 && ($1 != $5 || $2 != $6 || $3 != $7 || $4 != $8) {
          print ($1 < $5 ? $1 : $5), $0; exit }')
      [ -n "$first" ] || continue
      read -r o _ <<<"$first"
      if ((o < hw)); then
        symptom "partition $1: $a and $b diverge at offset $o, below the high watermark $hw" \
          "(base, last offset, leader epoch, crc: $(cut -d' ' -f2-5 <<<"$first") on $a," \
          "$(cut -d' ' -f6-9 <<<"$first") on $b)"
      fi
    done
  done
}
end_with_symptoms() {
  if [ -s "$WORK/symptoms" ]; then
    log "the symptom showed:"; sed "s/^/  /" "$WORK/symptoms"; exit 1
  fi
  log "no symptom showed"; exit 0
}

# --- clients: the release's KafkaProducer in jshell (needs a JDK), one shell per client ----
# A shell lives from the setup to the end, reading statements from a FIFO: each step's call
# then takes milliseconds, as logfork's do, where a new JVM per step would take seconds.
start_shell() {  # start_shell NAME FD
  mkfifo "$WORK/$1.in"
  java_shell <"$WORK/$1.in" >"$WORK/$1.out" 2>&1 &
  PID[$1]=$!
  eval "exec $2>\"\$WORK/$1.in\""
}
SHELL_CALLS=0
in_shell() {  # in_shell NAME FD CALL STATEMENTS: run them in the shell; wait for its answer
  SHELL_CALLS=$((SHELL_CALLS + 1))
  local name="$3-$SHELL_CALLS" code
  code=$(echo "$4" | tr '\n' ' ')
  echo "try { $code; System.out.println(\"DONE $name\"); }" \
    "catch (Exception e) { System.out.println(\"FAILED $name \" + e); }" >&"$2"
  wait_until "the $1 answered $name" 300 grep -qE "(DONE|FAILED) $name( |\$)" "$WORK/$1.out"
  grep -oE "(DONE|FAILED) $name( .*|\$)" "$WORK/$1.out" | head -1
}
STRINGS='p.put("key.serializer", "org.apache.kafka.common.serialization.StringSerializer");
  p.put("value.serializer", "org.apache.kafka.common.serialization.StringSerializer");'
RECORD="new org.apache.kafka.clients.producer.ProducerRecord<>"

# A transactional producer, started while the cluster is whole.
start_producer() {
  start_shell producer 7
  echo 'org.apache.kafka.clients.producer.KafkaProducer<String, String> tx = null;' >&7
  producer init "var p = new java.util.Properties(); p.put(\"bootstrap.servers\", \"$BOOT\");
    p.put(\"transactional.id\", \"$TRANSACTIONAL_ID\");
    p.put(\"transaction.timeout.ms\", \"$TRANSACTION_TIMEOUT_MS\"); $STRINGS
    tx = new org.apache.kafka.clients.producer.KafkaProducer<String, String>(p);
    tx.initTransactions()"
}
producer() { in_shell producer 7 "$@"; }
txn_send() {  # txn_send PARTITIONS COUNT: one transaction's writes, each acknowledged
  [ -n "${TXN_OPEN:-}" ] || { producer begin "tx.beginTransaction()"; TXN_OPEN=1; }
  producer write "for (int q = 0; q < $1; q++) for (int i = 0; i < $2; i++)
    tx.send(new org.apache.kafka.clients.producer.ProducerRecord<>(\"$TOPIC\", q, \"k\",
    \"v\" + i)).get()"
}

# --- the Admin API in jshell, for what no tool does alone -----------------------------------
admin() {  # admin STATEMENTS: run them with an Admin client named `admin`; fails if they throw
  printf '%s\n' \
    "var p = new java.util.Properties(); p.put(\"bootstrap.servers\", \"$BOOT\");" \
    "var admin = org.apache.kafka.clients.admin.Admin.create(p);" \
    "try { $1; System.out.println(\"DONE admin\"); } catch (Exception e) {" \
    "System.out.println(\"FAILED admin \" + e); }" "admin.close();" "/exit" |
    java_shell >"$WORK/admin.out" 2>&1
  grep -q "DONE admin" "$WORK/admin.out" || { cat "$WORK/admin.out" >&2; return 1; }
}

# --- a replica moved to its broker's other log dir (KIP-113), awaited until swapped in ------
# Through the Admin API's alterReplicaLogDirs, the request logfork sends; kafka-reassign-
# partitions.sh with log_dirs sends it too, but beside a reassignment of the same replicas.
move_replica() {  # move_replica BROKER: the replica of partition 0 on BROKER
  local b=$1 node="$WORK/${NODE_OF[$1]}" from to
  from=$(dirname "$(ls -d "$node"/data*/"$TOPIC-0")")
  to=$(ls -d "$node"/data* | grep -vxF "$from" | head -1)
  cp "$from/$TOPIC-0/leader-epoch-checkpoint" "$WORK/epochs-before-move-$b"
  admin "admin.alterReplicaLogDirs(java.util.Map.of(new org.apache.kafka.common.TopicPartitionReplica(
    \"$TOPIC\", 0, $b), \"$to\")).all().get()"
  moved() { [ -d "$to/$TOPIC-0" ] && ! ls -d "$node"/data*/"$TOPIC"-0.*-future >/dev/null 2>&1; }
  wait_until "broker $b's replica swapped from $(basename "$from") into $(basename "$to")" 120 moved
  epochs_kept "$to/$TOPIC-0/leader-epoch-checkpoint" "$WORK/epochs-before-move-$b" "$b"
}

# --- plain writes: a producer per broker and acks, each bootstrapped from that broker alone,
# as logfork's writes through the broker a step names (a zombie leader included) --------------
start_writer() {
  start_shell writer 8
  echo 'var writers = new java.util.HashMap<String, org.apache.kafka.clients.producer.KafkaProducer<String, String>>();' >&8
  echo "java.util.function.BiFunction<String, String, org.apache.kafka.clients.producer.KafkaProducer<String, String>> writer = (boot, acks) -> writers.computeIfAbsent(boot + \"/\" + acks, k -> { var p = new java.util.Properties(); p.put(\"bootstrap.servers\", boot); p.put(\"acks\", acks); p.put(\"linger.ms\", \"100\"); $(echo "$STRINGS" | tr '\n' ' ') return new org.apache.kafka.clients.producer.KafkaProducer<String, String>(p); });" >&8
}
# One batch of COUNT records to partition 0 (sent together, then each awaited), after a
# filler: one record of FILLER_KB KB to the filler topic, acks=1, that a slow link holds a
# fetch response back behind (suites.explore.live.writes).
produce() {  # produce ACKS COUNT FILLER_KB BROKER
  local n=${NODE_OF[$4]} boot
  boot="$(addr_of "$n"):$((PORT_BASE + LISTEN[$n]))"
  if (($3 > 0)); then
    in_shell writer 8 filler "writer.apply(\"$boot\", \"1\").send($RECORD(\"$TOPIC-filler\", 0,
      \"f\", \"f\".repeat($3 * 1000))).get(30, java.util.concurrent.TimeUnit.SECONDS)" |
      grep -q DONE || not_reached "a $3 KB filler written through broker $4"
  fi
  in_shell writer 8 write "var w = writer.apply(\"$boot\", \"$1\");
    var sent = new java.util.ArrayList<java.util.concurrent.Future<?>>();
    for (int i = 0; i < $2; i++) sent.add(w.send($RECORD(\"$TOPIC\", 0, \"k\", \"v\" + i)));
    int ok = 0; for (var f : sent) { try { f.get(); ok++; } catch (Exception e) {
    System.out.println(\"FAILED write \" + e); } } System.out.println(\"WROTE \" + ok)" >/dev/null
  log "$(grep -oE 'WROTE [0-9]+' "$WORK/writer.out" | tail -1 | cut -d' ' -f2) of $2 written" \
    "through broker $4 (acks=$1)"
}
