# Two commands do all set-up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
#: The runtime's packages (what `make demo` needs) and, for the tests and tools, the test extra too.
RUN_STAMP := $(VENV)/.installed-run
STAMP     := $(VENV)/.installed

.PHONY: demo demo-spark demo-cdc demo-mysql demo-db test test-long lint soak soak-spark soak-secured soak-long bench kafka postgres mariadb chromium registry lake-jars install clean

# The demo installs only the runtime: the test extra (lake libraries, a browser driver, linters)
# would add a good part of a fresh machine's set-up time to it.
$(RUN_STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e .
	touch $(RUN_STAMP)

$(STAMP): $(RUN_STAMP)
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

postgres:  ## PostgreSQL binaries for the JdbcSource tests (Debian packages; tests start their own server)
	@command -v pg_ctl >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1 || \
	  (mkdir -p /etc/postgresql-common/createcluster.d && \
	   echo 'create_main_cluster = false' > /etc/postgresql-common/createcluster.d/no-main.conf && \
	   apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends postgresql) \
	  || echo "PostgreSQL could not be installed: its JdbcSource tests will be skipped"

mariadb:  ## MariaDB binaries for JdbcSink's MariaDB tests and MySqlCdcSource's (Debian's mariadb-server, its service not started; tests start their own server)
	@command -v mariadbd >/dev/null 2>&1 || test -x /usr/sbin/mariadbd || \
	  ((apt-cache policy mariadb-server 2>/dev/null | grep -q 'Candidate: [0-9]' || apt-get update -q) && \
	   RUNLEVEL=1 DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends mariadb-server) \
	  || echo "MariaDB could not be installed: JdbcSink's MariaDB tests will be skipped"

chromium:  ## Chromium and its WebDriver for the console's browser tests (Debian's chromium, chromium-driver)
	@(command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1) || \
	  ((apt-cache policy chromium-driver 2>/dev/null | grep -q 'Candidate: [0-9]' || apt-get update -q) && \
	   DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium chromium-driver) \
	  || echo "Chromium could not be installed: the console's browser tests will be skipped"

kafka: $(RUN_STAMP)  ## fetch the Apache Kafka jars once (cached outside the repo)
	$(BIN)/python -c "from eosconnect.devkafka import ensure_kafka; print(ensure_kafka())"

# Apicurio Registry (the schema registry tests) needs Java 21+: the default JDK may be older, so a
# newer one is found under /usr/lib/jvm, else installed from Debian where it has one; without it the
# registry tests are skipped. The registry itself is fetched once from Maven Central like the Kafka jars.
registry: $(RUN_STAMP)  ## Java 21+ and Apicurio Registry for the schema registry tests
	@$(BIN)/python -c "from eosconnect.devkafka.java_runtime import find_java; exit(find_java(21) is None)" || \
	  (apt-cache policy openjdk-21-jre-headless 2>/dev/null | grep -q 'Candidate: [0-9]' || apt-get update -q; \
	   apt-cache policy openjdk-21-jre-headless 2>/dev/null | grep -q 'Candidate: [0-9]' && \
	   DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends openjdk-21-jre-headless) || \
	  echo "No Java 21+ could be found or installed: the schema registry tests will be skipped"
	$(BIN)/python -c "from eosconnect.devkafka.registry import ensure_registry_app; print(ensure_registry_app())"

# The environment in which Spark SQL reads the lake sinks' Delta and Iceberg tables in their tests:
# a virtualenv with only a PySpark whose Spark line delta-spark and iceberg-spark-runtime are built
# for, and those jars (see src/eosconnect/devkafka/lake_jars.py), built once under the cache dir.
# Without PyPI or Maven Central the Spark reads skip, naming why.
lake-jars: $(RUN_STAMP)  ## the Spark reader venv and the delta-spark / iceberg-spark-runtime jars for the lake sinks' tests
	$(BIN)/python -c "from eosconnect.devkafka.lake_jars import lake_spark_jars as j, reader_python as p; print(p()); [print(j(f)[0]) for f in ('delta', 'iceberg')]" \
	  || echo "The Spark lake reader could not be built: the Delta/Iceberg Spark reads will be skipped"

demo: kafka
	$(BIN)/eosconnect demo

demo-spark: kafka  ## JdbcSource -> Spark -> eosconnect-kafka through a driver SIGKILL, verified
	$(BIN)/eosconnect demo-spark

demo-cdc: kafka postgres  ## PostgreSQL -> PostgresCdcSource -> Kafka -> JdbcSink -> PostgreSQL through a task SIGKILL, compared row by row
	$(BIN)/python -m eosconnect.tools.demo_cdc

demo-mysql: kafka mariadb postgres  ## MariaDB -> MySqlCdcSource -> Kafka -> JdbcSink -> PostgreSQL through a task SIGKILL, compared row by row
	$(BIN)/python -m eosconnect.tools.demo_mysql

demo-db: kafka postgres  ## JdbcSource -> Kafka -> JdbcSink into PostgreSQL through a sink task SIGKILL, compared row by row
	$(BIN)/eosconnect demo-db

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/mypy

# Two test processes (pytest-xdist), each with its own broker and Spark session: most of a test's
# time is spent waiting on brokers and timeouts, so two share the 2 cores well (a whole run took 38
# min so, against 57 one at a time). --dist loadfile keeps a file's tests, and its module fixtures,
# in one process.
test: kafka postgres mariadb chromium registry lake-jars lint
	$(BIN)/pytest -m "not soak" -p no:cacheprovider -n 2 --dist loadfile

# Every integration test in its long form (EOSCONNECT_LONG_TESTS=1: longer outages, more rounds and
# records); `make test` runs the short forms.
test-long: $(STAMP) kafka postgres mariadb chromium registry lake-jars
	EOSCONNECT_LONG_TESTS=1 $(BIN)/pytest -m "not soak" -p no:cacheprovider -n 2 --dist loadfile

# Chaos soak (tests/soak): EOSCONNECT_SOAK_SECONDS of random faults (default 600, at least one of each
# kind), EOSCONNECT_SOAK_SEED=<seed> replays a schedule; -s streams the fault timeline.
soak: $(STAMP) kafka postgres
	$(BIN)/pytest -m soak -p no:cacheprovider -s

# The soak on a Spark standalone cluster (two Spark workers in mount namespaces; a seventh fault kills
# one, executor and tasks included). EOSCONNECT_SOAK_SECONDS and _SEED as for `make soak`.
soak-spark: $(STAMP) kafka postgres
	EOSCONNECT_SOAK_SPARK=standalone $(BIN)/pytest -m soak -p no:cacheprovider -s

# The soak on three SASL_SSL brokers with an authorizer, each client as its own principal with exactly
# KIP-618's ACLs (tests/support/secured_soak.py). EOSCONNECT_SOAK_SECONDS and _SEED as for `make soak`;
# CI runs it with EOSCONNECT_SOAK_SECONDS=0 (one fault of each kind, no random time after them).
soak-secured: $(STAMP) kafka
	EOSCONNECT_SOAK_SECURITY=sasl_ssl $(BIN)/pytest -m soak -p no:cacheprovider -s

# The long soak: 3 random seeds x 20 minutes, every source transaction boundary at once (poll,
# interval, connector: a source each, see tests/soak/test_chaos.py), about 70 minutes. Stops at the
# first failing run.
soak-long: $(STAMP) kafka postgres
	for run in 1 2 3; do \
	  EOSCONNECT_SOAK_SECONDS=1200 $(BIN)/pytest -m soak -p no:cacheprovider -s || exit 1; \
	done

bench: $(STAMP) kafka postgres
	PYTHONPATH=. $(BIN)/python bench/source_throughput.py
	PYTHONPATH=. $(BIN)/python bench/fencing.py
	PYTHONPATH=. $(BIN)/python bench/spark_sink.py
	PYTHONPATH=. $(BIN)/python bench/vs_kafka_connect.py
	PYTHONPATH=. $(BIN)/python bench/vs_kafka_connect_schemas.py
	PYTHONPATH=. $(BIN)/python bench/vs_debezium_cdc.py
	PYTHONPATH=. $(BIN)/python bench/vs_debezium_jdbc_sink.py
	PYTHONPATH=. $(BIN)/python bench/vs_debezium_jdbc_sink.py --crash
	PYTHONPATH=.:tests $(BIN)/python bench/fidelity_vs_debezium_jdbc_sink.py
	PYTHONPATH=. $(BIN)/python bench/density.py

clean:
	rm -rf $(VENV) .eosconnect
