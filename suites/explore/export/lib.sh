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
  mkfifo "$WORK/producer.in"
  java_shell <"$WORK/producer.in" >"$WORK/producer.out" 2>&1 &
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

# --- plain writes: the release's KafkaProducer in jshell -----------------------------------
produce() {  # produce ACKS COUNT FILLER: COUNT records to partition 0, each awaited
  local s=org.apache.kafka.common.serialization.StringSerializer
  printf '%s\n' \
    "var p = new java.util.Properties(); p.put(\"bootstrap.servers\", \"$BOOT\");" \
    "p.put(\"acks\", \"$1\"); p.put(\"key.serializer\", \"$s\"); p.put(\"value.serializer\", \"$s\");" \
    "var w = new org.apache.kafka.clients.producer.KafkaProducer<String, String>(p);" \
    "int ok = 0; for (int i = 0; i < $2; i++) { try { w.send(new org.apache.kafka.clients.producer.ProducerRecord<>(\"$TOPIC\", 0, \"k\", \"v\" + i + \"x\".repeat($3))).get(); ok++; } catch (Exception e) { System.out.println(\"FAILED write \" + e); } }" \
    "System.out.println(\"DONE wrote \" + ok); w.close();" "/exit" |
    java_shell >"$WORK/produce.out" 2>&1
  log "$(grep -oE 'DONE wrote [0-9]+' "$WORK/produce.out") of $2 (acks=$1)"
}
