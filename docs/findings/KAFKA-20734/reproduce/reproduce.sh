#!/usr/bin/env bash
# KAFKA-20734.json on Kafka 4.3.1
# Written by `logfork replay --export-script` on 2026-12-02 from the replay in
# replay-KAFKA-20734-4.3.1-kraft-20261202-155115 (Kafka 4.3.1, kraft); it needs no logfork.
#
# Runs the same cluster as plain Java processes on 127.0.0.1 (ports from PORT_BASE), the
# same steps with Kafka's own tools and kill(1), and checks the symptom with Kafka's
# DumpLogSegments. Needs bash, awk, java; a Kafka 4.3.1 distribution:
#     KAFKA_HOME=/path/to/kafka_2.13-4.3.1 ./reproduce.sh
# (or KAFKA_LIBS=a directory holding every jar). WORK=DIR keeps the nodes' files there;
# PORT_BASE=N moves the nodes' ports (default 29090, then every 10th).
# Exit: 1 the symptom showed, 0 it did not, 3 a wait gave up (the state was not reached),
# 2 a command failed (the script could not run: see $WORK/tools.log).
set -eEuo pipefail
trap 'echo "line $LINENO: a command failed (exit $?); see $WORK/tools.log" >&2; exit 2' ERR
HERE=$(cd "$(dirname "$0")" && pwd)
LIBS=${KAFKA_LIBS:-${KAFKA_HOME:?set KAFKA_HOME to a Kafka 4.3.1 distribution}/libs}
WORK=${WORK:-$(mktemp -d /tmp/reproduce.XXXXXX)}
TOPIC=reproduce
PORT_BASE=${PORT_BASE:-29090}
BOOT=127.0.0.1:$((PORT_BASE + 0)),127.0.0.1:$((PORT_BASE + 10)),127.0.0.1:$((PORT_BASE + 20))
NODES="b1 b2 b3 c1"
METADATA_NODE=c1
pick_class() {  # the first of these classes the jars hold (a jar lists its entries plainly)
  local c
  for c in "$@"; do
    if grep -qaF "${c//.//}.class" "$LIBS"/kafka*.jar; then echo "$c"; return; fi
  done
  echo "none of $* is in $LIBS" >&2; echo "${1}"
}
DUMP_LOG=$(pick_class org.apache.kafka.tools.DumpLogSegments kafka.tools.DumpLogSegments)
REASSIGN=$(pick_class org.apache.kafka.tools.reassign.ReassignPartitionsCommand kafka.admin.ReassignPartitionsCommand)
STORAGE=$(pick_class kafka.tools.StorageTool org.apache.kafka.tools.StorageTool)
TOPICS=$(pick_class org.apache.kafka.tools.TopicCommand kafka.admin.TopicCommand)
TRANSACTIONS=$(pick_class org.apache.kafka.tools.TransactionsCommand)
declare -A PID NODE_OF
NODE_OF[1]=b1
NODE_OF[2]=b2
NODE_OF[3]=b3
LOG_PROPERTY=log4j2.configurationFile
LOG_PREFIX=
LOG_CONFIG=log4j2.properties
TRANSACTIONAL_ID=reproduce
TRANSACTION_TIMEOUT_MS=60000
format_node() {
  case $1 in
    b1) tool "$STORAGE" format -t y8_DgY3NQhOx-b1qvXFFwQ -c "$WORK"/b1/server.properties >/dev/null ;;
    b2) tool "$STORAGE" format -t y8_DgY3NQhOx-b1qvXFFwQ -c "$WORK"/b2/server.properties >/dev/null ;;
    b3) tool "$STORAGE" format -t y8_DgY3NQhOx-b1qvXFFwQ -c "$WORK"/b3/server.properties >/dev/null ;;
    c1) tool "$STORAGE" format -t y8_DgY3NQhOx-b1qvXFFwQ -c "$WORK"/c1/server.properties >/dev/null ;;
  esac
}
# --- The helpers every exported script shares (suites/explore/export/lib.sh) ---------------
port_sed() {  # a sed script putting each @PORT+n@ of the configs at PORT_BASE + n
  local t o
  grep -ho '@PORT+[0-9]*@' "$HERE"/nodes/*/* | sort -u | while read -r t; do
    o=${t#@PORT+}; echo "s#$t#$((PORT_BASE + ${o%@}))#g;"
  done
}
log() { echo "[$(date +%H:%M:%S)] $*"; }
# Kafka's own tools, by the main class their bin/ script runs.
tool() { local main=$1; shift; java -Xmx256m -cp "$LIBS/*" "$main" "$@" 2>>"$WORK/tools.log"; }
wait_until() {  # wait_until WHAT SECONDS COMMAND...: poll until COMMAND succeeds, or exit 3
  local what=$1 limit=$2; shift 2; local end=$((SECONDS + limit))
  until "$@"; do
    if ((SECONDS >= end)); then log "gave up after ${limit}s waiting for $what"; exit 3; fi
    sleep 0.5
  done
  log "$what"
}
start_node() {
  local n=$1
  java -Xmx384m -Xms64m -XX:+UseSerialGC "-D$LOG_PROPERTY=$LOG_PREFIX$WORK/$n/$LOG_CONFIG" \
    -cp "$LIBS/*" kafka.Kafka "$WORK/$n/server.properties" >"$WORK/$n/stdout.log" 2>&1 &
  PID[$n]=$!
}
stopped() { ! kill -0 "${PID[$1]}" 2>/dev/null; }
cleanup() {
  for n in "${!PID[@]}"; do kill -KILL "${PID[$n]}" 2>/dev/null || true; done
  wait 2>/dev/null || true
  log "every process stopped; the nodes' logs and data are in $WORK"
}
trap cleanup EXIT

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
has_leader() {
  tool "$TOPICS" --bootstrap-server "$BOOT" --describe --topic "$TOPIC" |
    grep -q "Partition: 0.*Leader: [0-9]"
}

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
end_with_symptoms() {
  if [ -s "$WORK/symptoms" ]; then
    log "the symptom showed:"; sed "s/^/  /" "$WORK/symptoms"; exit 1
  fi
  log "no symptom showed"; exit 0
}

# --- a transactional producer: the release's KafkaProducer in jshell (needs a JDK) --------
start_producer() {
  local cp; cp=$(ls "$LIBS"/*.jar | paste -sd: -)
  mkfifo "$WORK/producer.in"
  jshell -q -R-Xmx256m --class-path "$cp" <"$WORK/producer.in" >"$WORK/producer.out" 2>&1 &
  PID[producer]=$!
  exec 7>"$WORK/producer.in"
  echo 'org.apache.kafka.clients.producer.KafkaProducer<String, String> tx = null;' >&7
  local s=org.apache.kafka.common.serialization.StringSerializer
  producer init "var p = new java.util.Properties(); p.put(\"bootstrap.servers\", \"$BOOT\");
    p.put(\"transactional.id\", \"$TRANSACTIONAL_ID\");
    p.put(\"transaction.timeout.ms\", \"$TRANSACTION_TIMEOUT_MS\");
    p.put(\"key.serializer\", \"$s\"); p.put(\"value.serializer\", \"$s\");
    tx = new org.apache.kafka.clients.producer.KafkaProducer<String, String>(p);
    tx.initTransactions()"
}
PRODUCER_CALLS=0
producer() {  # producer NAME STATEMENTS: run them in the producer's shell; wait for its answer
  PRODUCER_CALLS=$((PRODUCER_CALLS + 1))
  local name="$1-$PRODUCER_CALLS" code
  code=$(echo "$2" | tr '\n' ' ')
  echo "try { $code; System.out.println(\"DONE $name\"); }" \
    "catch (Exception e) { System.out.println(\"FAILED $name \" + e); }" >&7
  wait_until "the producer answered $name" 300 grep -qE "(DONE|FAILED) $name( |\$)" \
    "$WORK/producer.out"
  grep -oE "(DONE|FAILED) $name( .*|\$)" "$WORK/producer.out" | head -1
}
txn_send() {  # txn_send PARTITIONS COUNT: one transaction's writes, each acknowledged
  [ -n "${TXN_OPEN:-}" ] || { producer begin "tx.beginTransaction()"; TXN_OPEN=1; }
  producer write "for (int q = 0; q < $1; q++) for (int i = 0; i < $2; i++)
    tx.send(new org.apache.kafka.clients.producer.ProducerRecord<>(\"$TOPIC\", q, \"k\",
    \"v\" + i)).get()"
}

# --- the Admin API in jshell, for what no tool does alone -----------------------------------
admin() {  # admin STATEMENTS: run them with an Admin client named `admin`; fails if they throw
  local cp; cp=$(ls "$LIBS"/*.jar | paste -sd: -)
  printf '%s\n' \
    "var p = new java.util.Properties(); p.put(\"bootstrap.servers\", \"$BOOT\");" \
    "var admin = org.apache.kafka.clients.admin.Admin.create(p);" \
    "try { $1; System.out.println(\"DONE admin\"); } catch (Exception e) {" \
    "System.out.println(\"FAILED admin \" + e); }" "admin.close();" "/exit" |
    jshell -q -R-Xmx256m --class-path "$cp" >"$WORK/admin.out" 2>&1
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
log "Kafka jars: $LIBS; nodes' files: $WORK"
for n in $NODES; do
  mkdir -p "$WORK/$n"
  for f in "$HERE/nodes/$n"/*; do
    sed -e "s#@WORK@#$WORK#g" -e "$(port_sed)" "$f" >"$WORK/$n/$(basename "$f")"
  done
  format_node "$n"
  start_node "$n"
done
wait_until "broker 1 registered and unfenced" 120 is_unfenced 1
wait_until "broker 2 registered and unfenced" 120 is_unfenced 2
wait_until "broker 3 registered and unfenced" 120 is_unfenced 3
tool "$TOPICS" --bootstrap-server "$BOOT" --create --topic "$TOPIC" --replica-assignment 2:3,2:3 --config min.insync.replicas=1 --config unclean.leader.election.enable=false >/dev/null
wait_until "partition 0 has a leader" 60 has_leader
start_producer

# step 0: transactional write of 3
txn_send 1 3
log "step 0 done: transactional write of 3"
# step 1: SIGTERM broker 3
kill -TERM "${PID[${NODE_OF[3]}]}"
wait_until "broker 3 shut down" 300 stopped "${NODE_OF[3]}"
log "step 1 done: SIGTERM broker 3"
# step 2: SIGTERM broker 2
kill -TERM "${PID[${NODE_OF[2]}]}"
wait_until "broker 2 shut down" 300 stopped "${NODE_OF[2]}"
log "step 2 done: SIGTERM broker 2"
# step 3: commit the transaction
producer commit "tx.commitTransaction()"
TXN_OPEN=
log "step 3 done: commit the transaction"
# step 4: restart broker 2
start_node "${NODE_OF[2]}"
wait_until "broker 2 registered and unfenced" 180 is_unfenced 2
log "step 4 done: restart broker 2"
# step 5: restart broker 3
start_node "${NODE_OF[3]}"
wait_until "broker 3 registered and unfenced" 180 is_unfenced 3
log "step 5 done: restart broker 3"
# The heal, as the replay's: paused brokers resumed, stopped ones started.
for n in "${!PID[@]}"; do kill -CONT "${PID[$n]}" 2>/dev/null || true; done
if stopped b1; then start_node b1; fi
wait_until "broker 1 unfenced" 180 is_unfenced 1
if stopped b2; then start_node b2; fi
wait_until "broker 2 unfenced" 180 is_unfenced 2
if stopped b3; then start_node b3; fi
wait_until "broker 3 unfenced" 180 is_unfenced 3

# The symptom, through Kafka's own tools; what they printed stays in $WORK.
check_fenced_leaders
check_closed 0 60
check_closed 1 60
dump_partition b1 0
dump_partition b2 0
dump_partition b3 0
end_with_symptoms
