#!/usr/bin/env bash
# Candidate (b) on a real kernel: is a KRaft node's freshly formatted bootstrap metadata on an
# ext4 disk after a power cut DELAY seconds after `kafka-storage format`?
#
#   KAFKA_LIBS=DIR ./format-power-cut.sh RELEASE DELAY [RUNS]   (root; see vm.sh)
#
# One combined node (broker and controller, a static quorum of itself), as every KRaft
# controller is formatted. Boot 1 formats the disk, waits DELAY seconds and the power is cut.
# Boot 2 mounts what the disk kept (the kernel replays ext4's journal), lists the metadata
# log dir and starts the node. One line per run goes to results.tsv beside this script:
# date, release, delay, what the disk kept, and how the node's start ended.
set -eEuo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/vm.sh"
RELEASE=${1:?release} DELAY=${2:?seconds between the format and the power cut} RUNS=${3:-1}
LIBS=${KAFKA_LIBS:?set KAFKA_LIBS to a directory holding Kafka $RELEASE jars}
JAVA=${JAVA:-$(readlink -f "$(command -v java)")}

storage_class() {  # the StorageTool these jars hold
  local c
  for c in kafka.tools.StorageTool org.apache.kafka.tools.StorageTool; do
    if grep -qaF "${c//.//}.class" "$LIBS"/kafka*.jar; then echo "$c"; return; fi
  done
  echo "no StorageTool in $LIBS" >&2; exit 2
}
STORAGE=$(storage_class)
vm_build

write_node() {  # WORK: the node's configs, in the guest's paths (/srv is WORK, /media the disk)
  cat > "$1/server.properties" <<EOF
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:9093
controller.listener.names=CONTROLLER
listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=/media/logs
offsets.topic.replication.factor=1
EOF
  if compgen -G "$LIBS/log4j-core-*.jar" > /dev/null; then
    LOG_OPT="-Dlog4j2.configurationFile=/srv/log4j2.properties"
    printf '%s\n' 'appender.out.type = Console' 'appender.out.name = OUT' \
      'appender.out.layout.type = PatternLayout' 'appender.out.layout.pattern = [%d] %p %m (%c)%n' \
      'rootLogger.level = info' 'rootLogger.appenderRef.out.ref = OUT' > "$1/log4j2.properties"
  else
    LOG_OPT="-Dlog4j.configuration=file:/srv/log4j.properties"
    printf '%s\n' 'log4j.rootLogger=INFO, out' 'log4j.appender.out=org.apache.log4j.ConsoleAppender' \
      'log4j.appender.out.layout=org.apache.log4j.PatternLayout' \
      'log4j.appender.out.layout.ConversionPattern=[%d] %p %m (%c)%n' > "$1/log4j.properties"
  fi
}

run_once() {
  local work disk; work=$(mktemp -d /tmp/format-power-cut.XXXXXX); disk=$work/disk.img
  vm_disk "$disk" 256
  write_node "$work"
  local java="$JAVA -Xmx384m -XX:+UseSerialGC $LOG_OPT -cp '$LIBS/*'"
  cat > "$work/guest.sh" <<EOF
# A failed format powers the guest off before its marker: the run is not reached, never
# counted as a disk that kept nothing.
$java $STORAGE format -t q1Sh-9_ISia_zwGINzRvyQ -c /srv/server.properties || exit 1
echo "LOGFORK-VM: formatted"; ls -l --time-style=+%T /media/logs
sleep $DELAY
echo "LOGFORK-VM: cut now"
sleep 600
EOF
  vm_boot "$work" "$disk" "$work/console-1.txt" "LOGFORK-VM: cut now" || {
    echo "boot 1 did not reach its power cut: $work/console-1.txt" >&2; return 3; }
  # Boot 2: what survived, then the node's start, which ends in "Kafka Server started" or
  # in an exit; 120 s without either is reported as such.
  cat > "$work/guest.sh" <<EOF
dmesg | grep -E 'EXT4-fs \(vda\)' | sed 's/^/kernel: /'
find /media/logs -type f -printf 'kept: %p %s bytes\n' | sort
$java kafka.Kafka /srv/server.properties > /srv/start.log 2>&1 &
pid=\$!
for i in \$(seq 1200); do
  grep -q 'Kafka Server started' /srv/start.log && { echo "start: started"; break; }
  kill -0 \$pid 2>/dev/null || { wait \$pid; echo "start: exited \$?"; break; }
  sleep 0.1
done
kill -9 \$pid 2>/dev/null || true
EOF
  vm_boot "$work" "$disk" "$work/console-2.txt" || {
    echo "boot 2 did not end: $work/console-2.txt" >&2; return 3; }
  local kept start cause
  kept=$(grep -oE 'kept: /media/logs/[^ ]*(bootstrap.checkpoint|0000000000\.checkpoint) [0-9]+' \
    "$work/console-2.txt" | sed 's|kept: /media/logs/||' | tr '\n' ' ')
  start=$(grep -oE 'start: .*' "$work/console-2.txt" | tr -d '\r' || echo "start: neither in 120 s")
  cause=$(grep -m1 -oE 'No FeatureLevelRecord[^(]*|[A-Za-z.]+Exception: [^(]*' "$work/start.log" || true)
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$(date -u '+%F %R')" "$RELEASE" "$DELAY" "${kept:-none}" \
    "$start" "$cause" | tee -a "$HERE/results.tsv"
  mkdir -p "$HERE/consoles/$RELEASE-$DELAY"
  cp "$work/console-1.txt" "$work/console-2.txt" "$HERE/consoles/$RELEASE-$DELAY/"
  grep -E 'ERROR|FATAL|Exception|started' "$work/start.log" | head -20 \
    > "$HERE/consoles/$RELEASE-$DELAY/start-lines.txt" || true
  rm -rf "$work"
}

[[ -s $HERE/results.tsv ]] || printf 'date\trelease\tdelay_s\tkept\tstart\tcause\n' > "$HERE/results.tsv"
for _ in $(seq "$RUNS"); do run_once; done
