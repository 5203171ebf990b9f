SERVICES+=(icebergrest)
# The Apache Iceberg REST catalog test server (RESTCatalogServer, the server
# of the apache/iceberg-rest-fixture image: Java's RESTCatalogAdapter over a
# JdbcCatalog) for the Iceberg sink's REST-catalog tests. No Docker: the jars
# come from Maven Central.
#
#   * The server's class is in iceberg-open-api's test-fixtures jar, whose
#     POM lists no dependencies; the servlet and adapter it runs are in
#     iceberg-core's tests jar. The classpath is those two, iceberg-core,
#     Jetty 12.1 (server, ee10 servlet, compression), Hadoop's shaded client
#     (HadoopFileIO: file:// tables), sqlite-jdbc and slf4j-simple, resolved
#     once with mvn into $CACHE/icebergrest-<version>/libs (about 85 MB).
#   * Every `up` that finds no running server starts from an empty catalog:
#     its SQLite database and its warehouse, a local directory that
#     iceberg-go and pyiceberg read and write directly, are under
#     $RUN/icebergrest.
#   * The server listens on all interfaces (its only setting is the port);
#     no authentication, though it answers the OAuth2 client-credentials
#     token endpoint with a token it does not check.
#   * `down` stops only the JVM whose pid file this script wrote.
#   * Start times on a 2-core machine under load: first `up` on an empty
#     Maven repository 35 s (the download; 14 s with ~/.m2 already warm),
#     then 2-6 s (a fresh JVM; Jetty reports itself started 0.1-0.3 s into
#     it), 0.5 s when the server is already running.
#   * Every 409 the sink provokes (a namespace that exists, a moved branch)
#     is logged with its stack in server.log: a few MB per test run.
#
# Environment for the tests:
#   FLIGHTLINE_ICEBERG_REST_URI        http://127.0.0.1:<port>
#   FLIGHTLINE_ICEBERG_REST_WAREHOUSE  the server's warehouse directory
ICEBERG_REST_VERSION="${FLIGHTLINE_ICEBERG_REST_VERSION:-1.11.0}" # 1.12.0 is not on Maven Central
ICEBERG_REST_JETTY=12.1.14
ICEBERG_REST_HADOOP=3.4.2

# icebergrest_libs prints the cached classpath dir, resolving it with mvn on
# first use.
icebergrest_libs() {
	local dir="$CACHE/icebergrest-$ICEBERG_REST_VERSION" pom v="$ICEBERG_REST_VERSION" j="$ICEBERG_REST_JETTY"
	if [ -f "$dir/.complete" ]; then printf '%s' "$dir/libs"; return 0; fi
	command -v mvn >/dev/null || apt_install maven
	command -v java >/dev/null || apt_install openjdk-17-jre-headless
	rm -rf "$dir"; mkdir -p "$dir"
	pom="$dir/pom.xml"
	cat > "$pom" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>dev.flightline</groupId>
  <artifactId>iceberg-rest-classpath</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.iceberg</groupId><artifactId>iceberg-open-api</artifactId><version>$v</version><classifier>test-fixtures</classifier></dependency>
    <dependency><groupId>org.apache.iceberg</groupId><artifactId>iceberg-core</artifactId><version>$v</version></dependency>
    <dependency><groupId>org.apache.iceberg</groupId><artifactId>iceberg-core</artifactId><version>$v</version><classifier>tests</classifier></dependency>
    <dependency><groupId>org.eclipse.jetty</groupId><artifactId>jetty-server</artifactId><version>$j</version></dependency>
    <dependency><groupId>org.eclipse.jetty.ee10</groupId><artifactId>jetty-ee10-servlet</artifactId><version>$j</version></dependency>
    <dependency><groupId>org.eclipse.jetty.compression</groupId><artifactId>jetty-compression-server</artifactId><version>$j</version></dependency>
    <dependency><groupId>org.eclipse.jetty.compression</groupId><artifactId>jetty-compression-gzip</artifactId><version>$j</version></dependency>
    <dependency><groupId>org.apache.hadoop</groupId><artifactId>hadoop-client-api</artifactId><version>$ICEBERG_REST_HADOOP</version></dependency>
    <dependency><groupId>org.apache.hadoop</groupId><artifactId>hadoop-client-runtime</artifactId><version>$ICEBERG_REST_HADOOP</version></dependency>
    <dependency><groupId>org.xerial</groupId><artifactId>sqlite-jdbc</artifactId><version>3.50.3.0</version></dependency>
    <dependency><groupId>org.slf4j</groupId><artifactId>slf4j-simple</artifactId><version>2.0.17</version></dependency>
  </dependencies>
</project>
POM
	log "icebergrest: resolving iceberg-open-api:$v:test-fixtures and its classpath from Maven Central (first run only)"
	mvn -B -q -f "$pom" org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies \
		-DoutputDirectory="$dir/libs" -DincludeScope=runtime >"$dir/mvn.log" 2>&1 ||
		{ tail -n 30 "$dir/mvn.log" >&2; return 1; }
	touch "$dir/.complete"
	printf '%s' "$dir/libs"
}

# icebergrest_ready URI: the catalog answers its config endpoint.
icebergrest_ready() { curl -sf -m 2 "$1/v1/config" >/dev/null 2>&1; }

icebergrest_up() {
	local dir="$RUN/icebergrest" libs port uri t0=$SECONDS
	command -v curl >/dev/null || apt_install curl
	libs="$(icebergrest_libs)"
	mkdir -p "$dir"
	if running "$dir/pid" && [ -f "$dir/port" ] && icebergrest_ready "http://127.0.0.1:$(cat "$dir/port")"; then
		port="$(cat "$dir/port")"
		log "icebergrest: already running on 127.0.0.1:$port"
	else
		stop_pid "$dir/pid"
		rm -rf "$dir/warehouse" "$dir/catalog.db"
		mkdir -p "$dir/warehouse"
		port="$(free_port)"
		printf '%s' "$port" > "$dir/port"
		# RESTCatalogServer reads CATALOG_* variables as catalog properties
		# (CATALOG_REST_PORT is rest.port). setsid: the server must not die
		# with the shell that started it.
		CATALOG_WAREHOUSE="file://$dir/warehouse" CATALOG_URI="jdbc:sqlite:$dir/catalog.db" \
			CATALOG_JDBC_SCHEMA__VERSION=V1 CATALOG_REST_PORT="$port" \
			setsid java -Xmx384m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -cp "$libs/*" \
			org.apache.iceberg.rest.RESTCatalogServer >"$dir/server.log" 2>&1 < /dev/null &
		echo $! > "$dir/pid"
		local deadline=$((SECONDS + READY_S))
		until icebergrest_ready "http://127.0.0.1:$port"; do
			if ! running "$dir/pid"; then
				log "icebergrest: server exited during start"; tail -n 40 "$dir/server.log" >&2; return 1
			fi
			if ((SECONDS > deadline)); then
				log "icebergrest: no answer from 127.0.0.1:$port in ${READY_S}s"; tail -n 40 "$dir/server.log" >&2; return 1
			fi
			sleep 0.2
		done
		log "icebergrest: Iceberg $ICEBERG_REST_VERSION REST catalog ready on 127.0.0.1:$port after $((SECONDS - t0))s"
	fi
	setenv FLIGHTLINE_ICEBERG_REST_URI "http://127.0.0.1:$port"
	setenv FLIGHTLINE_ICEBERG_REST_WAREHOUSE "$dir/warehouse"
}

icebergrest_down() { stop_pid "$RUN/icebergrest/pid"; }
