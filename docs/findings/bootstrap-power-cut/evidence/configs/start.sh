#!/bin/sh
set -e
if [ ! -f /logfork/data/meta.properties ]; then
  java -Xmx512m -Xms64m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.awt.headless=true -XX:SharedArchiveFile=/opt/logfork/cds/classes.jsa -Xshare:auto -Dlog4j.configuration=file:/logfork/config/log4j.properties -cp '/opt/kafka/libs/*' kafka.tools.StorageTool format -t TyonLZ8IS0uQFwv1QgmUeQ -c /logfork/config/server.properties
  while [ -f /logfork/config/hold-after-format ]; do touch /logfork/config/held-after-format; sleep 0.1; done
fi
exec java -Xmx512m -Xms64m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.awt.headless=true -XX:SharedArchiveFile=/opt/logfork/cds/classes.jsa -Xshare:auto -Dlog4j.configuration=file:/logfork/config/log4j.properties -cp '/opt/kafka/libs/*' kafka.Kafka /logfork/config/server.properties
