SERVICES+=(kafka)
# Apache Kafka 4.x: a single-node KRaft broker (broker + controller in one
# JVM) on 127.0.0.1, from the jars on Maven Central, for the Kafka source and
# sink tests. No Debian package ships a broker, and there is no Docker.
#
#   * The classpath (kafka_2.13 plus a log4j2 backend; Kafka 4.x brings no
#     logging backend) is resolved once with mvn into $CACHE/kafka-<version>/
#     libs and reused by every later `up`.
#   * Every `up` that finds no running broker starts from empty storage under
#     $RUN/kafka (tests create their own topics; nothing is kept between
#     runs), on fresh free ports.
#   * Listeners: PLAINTEXT for the tests, SASL_PLAINTEXT with PLAIN (one user)
#     for the bad-credentials tests, and the controller listener.
#   * `down` stops only the JVM whose pid file this script wrote.
#
# Also installs kcat (librdkafka), the independent client the Kafka sink
# tests read back with.
#
# Environment for the tests:
#   FLIGHTLINE_KAFKA_BROKERS       127.0.0.1:<port>  (PLAINTEXT)
#   FLIGHTLINE_KAFKA_SASL_BROKERS  127.0.0.1:<port>  (SASL_PLAINTEXT, PLAIN)
#   FLIGHTLINE_KAFKA_SASL_USER / FLIGHTLINE_KAFKA_SASL_PASSWORD
#   FLIGHTLINE_KCAT                path of kcat
#   FLIGHTLINE_KAFKA_LIBS          the broker's classpath dir (a test that kills
#                                  a broker starts one of its own from it)
KAFKA_VERSION="${FLIGHTLINE_KAFKA_VERSION:-4.1.1}"
LOG4J_VERSION=2.24.3
SLF4J_VERSION=2.0.17
KAFKA_SASL_USER=flightline
KAFKA_SASL_PASSWORD=flightline-secret

# kafka_libs prints the cached lib dir, resolving it with mvn on first use.
kafka_libs() {
	local dir="$CACHE/kafka-$KAFKA_VERSION" pom
	if [ -f "$dir/.complete" ]; then printf '%s' "$dir/libs"; return 0; fi
	command -v mvn >/dev/null || apt_install maven
	command -v java >/dev/null || apt_install openjdk-17-jre-headless
	rm -rf "$dir"; mkdir -p "$dir"
	pom="$dir/pom.xml"
	cat > "$pom" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>dev.flightline</groupId>
  <artifactId>kafka-broker-classpath</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>$KAFKA_VERSION</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-core</artifactId><version>$LOG4J_VERSION</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-api</artifactId><version>$LOG4J_VERSION</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j2-impl</artifactId><version>$LOG4J_VERSION</version></dependency>
    <dependency><groupId>org.slf4j</groupId><artifactId>slf4j-api</artifactId><version>$SLF4J_VERSION</version></dependency>
  </dependencies>
</project>
POM
	log "kafka: resolving kafka_2.13:$KAFKA_VERSION from Maven Central (first run only)"
	mvn -B -q -f "$pom" org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies \
		-DoutputDirectory="$dir/libs" -DincludeScope=runtime >"$dir/mvn.log" 2>&1 ||
		{ tail -n 30 "$dir/mvn.log" >&2; return 1; }
	touch "$dir/.complete"
	printf '%s' "$dir/libs"
}

# kafka_ready ADDR: a metadata request answers (not just an open port).
kafka_ready() { kcat -L -b "$1" -m 3 >/dev/null 2>&1; }

kafka_up() {
	local dir="$RUN/kafka" libs port sport cport uuid t0=$SECONDS
	apt_install kcat
	setenv FLIGHTLINE_KCAT "$(command -v kcat)"
	libs="$(kafka_libs)"
	mkdir -p "$dir"
	if running "$dir/pid" && [ -f "$dir/port" ] && kafka_ready "127.0.0.1:$(cat "$dir/port")"; then
		port="$(cat "$dir/port")"; sport="$(cat "$dir/sasl_port")"
		log "kafka: already running on 127.0.0.1:$port"
	else
		stop_pid "$dir/pid"
		rm -rf "$dir/data"
		port="$(free_port)"; sport="$(free_port)"; cport="$(free_port)"
		while [ "$sport" = "$port" ]; do sport="$(free_port)"; done
		while [ "$cport" = "$port" ] || [ "$cport" = "$sport" ]; do cport="$(free_port)"; done
		cat > "$dir/server.properties" <<PROPS
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$cport
listeners=PLAINTEXT://127.0.0.1:$port,SASL_PLAINTEXT://127.0.0.1:$sport,CONTROLLER://127.0.0.1:$cport
advertised.listeners=PLAINTEXT://127.0.0.1:$port,SASL_PLAINTEXT://127.0.0.1:$sport
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT
inter.broker.listener.name=PLAINTEXT
controller.listener.names=CONTROLLER
sasl.enabled.mechanisms=PLAIN
listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_$KAFKA_SASL_USER="$KAFKA_SASL_PASSWORD";
log.dirs=$dir/data
num.partitions=1
auto.create.topics.enable=false
offsets.topic.replication.factor=1
offsets.topic.num.partitions=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
group.min.session.timeout.ms=1000
log.flush.interval.messages=9223372036854775807
PROPS
		cat > "$dir/log4j2.properties" <<L4J
status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = $dir/server.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.file.ref = file
logger.controller.name = org.apache.kafka.controller
logger.controller.level = warn
L4J
		uuid="$(java -cp "$libs/*" kafka.tools.StorageTool random-uuid 2>"$dir/format.log")" ||
			{ cat "$dir/format.log" >&2; return 1; }
		java -cp "$libs/*" -Dlog4j2.configurationFile="$dir/log4j2.properties" kafka.tools.StorageTool \
			format -t "$uuid" -c "$dir/server.properties" --ignore-formatted >>"$dir/format.log" 2>&1 ||
			{ cat "$dir/format.log" >&2; return 1; }
		printf '%s' "$port" > "$dir/port"
		printf '%s' "$sport" > "$dir/sasl_port"
		# setsid: the broker must not die with the shell that started it.
		setsid java -Xmx768m -Xms256m -XX:+UseG1GC -cp "$libs/*" \
			-Dlog4j2.configurationFile="$dir/log4j2.properties" \
			kafka.Kafka "$dir/server.properties" >"$dir/stdout.log" 2>&1 < /dev/null &
		echo $! > "$dir/pid"
		local deadline=$((SECONDS + READY_S))
		until kafka_ready "127.0.0.1:$port"; do
			if ! running "$dir/pid"; then
				log "kafka: broker exited during start"; tail -n 40 "$dir/server.log" "$dir/stdout.log" >&2 2>/dev/null; return 1
			fi
			if ((SECONDS > deadline)); then
				log "kafka: no metadata answer from 127.0.0.1:$port in ${READY_S}s"; tail -n 40 "$dir/server.log" >&2; return 1
			fi
			sleep 0.3
		done
		log "kafka: $KAFKA_VERSION ready on 127.0.0.1:$port (SASL 127.0.0.1:$sport) after $((SECONDS - t0))s"
	fi
	setenv FLIGHTLINE_KAFKA_BROKERS "127.0.0.1:$port"
	setenv FLIGHTLINE_KAFKA_LIBS "$libs"
	setenv FLIGHTLINE_KAFKA_SASL_BROKERS "127.0.0.1:$sport"
	setenv FLIGHTLINE_KAFKA_SASL_USER "$KAFKA_SASL_USER"
	setenv FLIGHTLINE_KAFKA_SASL_PASSWORD "$KAFKA_SASL_PASSWORD"
}

kafka_down() { stop_pid "$RUN/kafka/pid"; }
