# kafka-edu: every target installs what it needs first, so a fresh machine needs only python3, make and apt.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
APT_PACKAGES := openjdk-17-jre-headless zookeeper kcat graphviz chromium chromium-driver fonts-noto-cjk
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
STAMP := $(VENV)/.installed
NBVAL := $(BIN)/pytest -q -p no:cacheprovider --nbval --nbval-current-env \
         --nbval-sanitize-with book/nbval_sanitize.cfg book/

.PHONY: install system-packages run cluster cluster-stop test check-tangle lint unit nbval book book-test tangle notebooks bench clean

install: system-packages $(STAMP)

# Debian packages: ZooKeeper (and its Java runtime) for the cluster tests, kcat as a foreign client,
# graphviz's `dot` for the book's figures, chromium (with its WebDriver and CJK fonts for the book's
# Chinese title) to open the rendered book. Installed only when something is missing.
system-packages:
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "apt-get install$$missing"; \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get update -q && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $$missing; \
	fi

$(STAMP): pyproject.toml
	[ -x $(BIN)/python ] || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q -U pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

# One broker on 127.0.0.1:9092 with the embedded coordination backend; data under ./data.
run: install
	$(BIN)/kafka-edu server-start config/server.properties

# ZooKeeper (Debian's, on 127.0.0.1:2181) and three brokers (9092, 9093, 9094) in the background;
# data under ./data, their output under ./data/logs. See config/zookeeper.properties, config/server-N.properties.
CLUSTER_BROKERS := 0 1 2
cluster: install
	@mkdir -p data/logs
	$(BIN)/kafka-edu zookeeper-start --daemon --log-file data/logs/zookeeper.log config/zookeeper.properties
	@for i in $(CLUSTER_BROKERS); do \
	  $(BIN)/kafka-edu server-start --daemon --log-file data/logs/server-$$i.log config/server-$$i.properties || exit 1; \
	done
	@echo "Cluster running: bootstrap servers 127.0.0.1:9092,127.0.0.1:9093,127.0.0.1:9094"
	@echo "Check it with:   kcat -b 127.0.0.1:9092 -L"
	@echo "Stop it with:    make cluster-stop"

# Each broker with a controlled shutdown, then ZooKeeper; whatever is not running is skipped.
cluster-stop:
	@for i in $(CLUSTER_BROKERS); do $(BIN)/kafka-edu server-stop --config config/server-$$i.properties || true; done
	@$(BIN)/kafka-edu zookeeper-stop config/zookeeper.properties || true

tangle: $(STAMP)
	$(BIN)/python scripts/tangle.py

# Re-execute notebooks in a fresh kernel and store their outputs (NB=path to run just one).
notebooks: install
	$(BIN)/python scripts/run_notebooks.py $(NB)

check-tangle:
	$(PYTHON) scripts/tangle.py --check

lint: $(STAMP)
	$(BIN)/ruff check .

# tests/book needs the built book: book-test runs it after `book`. Two workers (pytest-xdist), each
# module whole on one (tests/conftest.py): most tests wait on brokers and clients rather than a core.
# Tests marked `serial` then run alone.
unit: install
	$(BIN)/pytest -q -p no:cacheprovider --ignore=tests/book -n 2 -m "not serial"
	$(BIN)/pytest -q -p no:cacheprovider --ignore=tests/book -m serial

nbval: install
	$(NBVAL)

book: install
	rm -rf _build/html _build/.doctrees _build/jupyter_execute _build/screenshots
	$(BIN)/jupyter-book build --all -W -n --keep-going .
	@echo "HTML: $(CURDIR)/_build/html/index.html"
	@echo "Serve it: $(BIN)/python -m http.server -d _build/html 8000   (then open http://127.0.0.1:8000/)"

# The rendered book in Debian's chromium: every page, its console, figures, links, TOC and search;
# one screenshot per part lands in _build/screenshots/.
book-test: book
	KAFKA_EDU_BOOK_HTML=$(CURDIR)/_build/html $(BIN)/pytest -q -p no:cacheprovider tests/book

test: install check-tangle lint unit nbval book book-test

# Every benchmark, sized to finish in under 15 minutes on this machine, each reporting to a fresh
# BENCH_RESULTS; then one table of every figure against its target, _build/bench/results.json and
# results.svg (BENCH_SUMMARY_FLAGS=--book also refreshes the appendix's copy). A benchmark that fails
# does not stop the others; the target fails at the end. BENCH_LOG_GB sizes large_log.py's log.
BENCH_RESULTS := _build/bench/results.jsonl
BENCH_LOG_GB ?= 10
BENCH_SUMMARY_FLAGS ?=
bench: install
	@mkdir -p _build/bench; rm -f $(BENCH_RESULTS); start=$$(date +%s); failed=""; \
	export KAFKA_EDU_BENCH_RESULTS=$(CURDIR)/$(BENCH_RESULTS); \
	run() { echo "== $$*"; $(BIN)/python "$$@" || failed="$$failed $$1"; }; \
	run benchmarks/log_append.py --size 256M --repeats 2; \
	run benchmarks/broker_vs_mock.py --records 100000 --repeats 2 --latency-seconds 2; \
	run benchmarks/request_floor.py --requests 2000; \
	run benchmarks/producer.py --records 50000 --repeats 2; \
	run benchmarks/consumer.py --records 50000 --repeats 2; \
	run benchmarks/partitions.py --repeats 2; \
	run benchmarks/large_log.py --log-gb $(BENCH_LOG_GB) --consume-mb 256 --repeats 2; \
	run benchmarks/connections.py --connections 10000 --records 100000 --repeats 2; \
	run benchmarks/cluster_acks.py --records 50000 --repeats 2 --catch-up-mb 16; \
	run benchmarks/security_cost.py --records 50000 --repeats 2; \
	run benchmarks/spark.py --records 200000 --repeats 1 --pipeline-records 0; \
	$(BIN)/python benchmarks/summarize.py $(BENCH_RESULTS) --seconds $$(( $$(date +%s) - start )) $(BENCH_SUMMARY_FLAGS); \
	if [ -n "$$failed" ]; then echo "failed:$$failed"; exit 1; fi

clean:
	rm -rf _build .pytest_cache
