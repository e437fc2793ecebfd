# Two commands do all set-up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test lint soak bench kafka install clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

kafka: $(STAMP)  ## fetch the Apache Kafka jars once (cached outside the repo)
	$(BIN)/python -c "from eosconnect.devkafka import ensure_kafka; print(ensure_kafka())"

demo: kafka
	$(BIN)/eosconnect demo

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench

test: kafka lint
	$(BIN)/pytest -m "not soak" -p no:cacheprovider

soak: kafka
	$(BIN)/pytest -m soak -p no:cacheprovider

bench: kafka
	$(BIN)/python bench/source_throughput.py

clean:
	rm -rf $(VENV) .eosconnect
