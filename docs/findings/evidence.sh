#!/usr/bin/env bash
# How each docs/findings/<ID>/evidence/ folder was cut from a run directory:
#   docs/findings/evidence.sh RUN_DIR OUT KAFKA_LIBS TOPIC PATTERN
# RUN_DIR is a `logfork replay` run directory (its nodes/ hold every node's config, log and
# the copied data), KAFKA_LIBS a directory holding the release's jars and its kafka-tools
# (`logfork replay --export-script` prints one), TOPIC the schedule's topic (s-...), PATTERN
# an extended regular expression for the log lines that show the mechanism. It writes:
#   OUT/log-lines.txt  every node's matching lines, "node [timestamp] ...", in time order
#   OUT/dumps/         each replica of partition 0 as DumpLogSegments prints its batches (cut
#                      to offsets, epochs, producer, flags, time, crc), the leader epoch
#                      checkpoints, the metadata log's records for the topic and the
#                      brokers' registrations and fencing, the transaction log if any
#   OUT/configs/       each node's server.properties
# It only reads RUN_DIR.
set -u
run=$1 out=$2 libs=$3 topic=$4 pat=$5
dump=kafka.tools.DumpLogSegments
grep -qaF org/apache/kafka/tools/DumpLogSegments.class "$libs"/kafka*.jar &&
  dump=org.apache.kafka.tools.DumpLogSegments
tool() { java -cp "$libs/*" "$dump" "$@" 2>/dev/null; }
mkdir -p "$out/dumps" "$out/configs"
for n in $(ls "$run/nodes"); do
  cp "$run/nodes/$n/config/server.properties" "$out/configs/$n.properties"
  for d in "$run/nodes/$n"/data*/"$topic-0"; do
    [ -d "$d" ] || continue
    for f in "$d"/*.log; do
      tool --files "$f" | grep '^baseOffset' | awk '{ l = ""
        for (i = 1; i < NF; i++) if ($i ~ /^(baseOffset|lastOffset|count|partitionLeaderEpoch|producerId|isTransactional|isControl|CreateTime|crc):$/) l = l $i " " $(i + 1) " "
        print l }'
    done >"$out/dumps/$n-$(basename "$(dirname "$d")")-partition-0.txt"
    if [ -f "$d/leader-epoch-checkpoint" ]; then
      echo "# $n $(basename "$(dirname "$d")")/$topic-0/leader-epoch-checkpoint"
      cat "$d/leader-epoch-checkpoint"
    fi >>"$out/dumps/leader-epoch-checkpoints.txt"
  done
done
c=$(ls "$run/nodes" | grep '^c' | head -1)
c=${c:-b1}
meta=$(mktemp)
tool --cluster-metadata-decoder --files "$(ls "$run/nodes/$c/data/__cluster_metadata-0"/*.log | paste -sd, -)" >"$meta"
id=$(grep "\"name\":\"$topic\"" "$meta" | grep -o '"topicId":"[^"]*"' | head -1)
grep -E "${id:-$topic}|FENCE|REGISTER_BROKER|REGISTRATION_CHANGE" "$meta" |
  sed 's/ CreateTime: [0-9]*//; s/ keySize: -1 valueSize: [0-9]* sequence: -1 headerKeys: \[\]//' \
    >"$out/dumps/$c-metadata-log.txt"
rm -f "$meta"
f=$(ls "$run/nodes"/*/data/__transaction_state-0/*.log 2>/dev/null | head -1)
if [ -n "$f" ]; then
  tool --transaction-log-decoder --files "$f" | grep payload |
    sed 's/ CreateTime: [0-9]*//; s/ keySize: [0-9]* valueSize: [0-9]* sequence: -1 headerKeys: \[\]//' \
      >"$out/dumps/transaction-state.txt"
fi
for n in $(ls "$run/nodes"); do
  for f in "$run/nodes/$n"/logs/*.log; do
    [ -f "$f" ] && grep -hE "$pat" "$f" | grep -v "^	" | sed "s/^/$n /" | cut -c1-400
  done
done | sort -k2,3 >"$out/log-lines.txt"
