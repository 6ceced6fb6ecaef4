# Pigeonhole — `make run` (embedded quick start) and `make test` (PostgreSQL + Redis beside embedded).
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
BIN := $(VENV)/bin
# Installed: the project with its dev extras (make test, lint, bench, …), and the project alone
# (what make run needs).
STAMP := $(VENV)/.installed
RUN_STAMP := $(VENV)/.installed-run
# make run's ports (make run PORT=8080 SMTP_PORT=2526); the defaults are the documented ones.
PORT ?= 8000
SMTP_PORT ?= 2525
# The demo workspace's admin key, kept between runs (mode 0600) so each run shows the same key.
DEMO_KEY_FILE := var/demo-admin-key

# Python writes its bytecode caches (__pycache__/, git-ignored) even where the environment says
# not to (PYTHONDONTWRITEBYTECODE=1 on some machines and CI images): otherwise every process
# compiles the project from source, and pytest re-rewrites the assertions of every test module,
# at each start. That was half of a test run's collection (14.4 s -> 6.7 s here) and a cost at
# each start of each live process the suite runs. An empty value is "not set" to Python.
export PYTHONDONTWRITEBYTECODE :=

export DATABASE_URL_TEST ?= postgres://postgres@127.0.0.1:5432/pigeonhole
export REDIS_URL_TEST ?= redis://127.0.0.1:6379/0

.PHONY: install run test test-fast test-postgres test-embedded lint bench chaos fuzz clean browser

$(BIN)/python:
	@[ -n "$(PYTHON)" ] && $(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { \
		echo "make: Python 3.11 or newer is required: put python3.11 (or a python3 that new) on PATH, or name one: make run PYTHON=/path/to/python3.12" >&2; exit 1; }
	@echo "make: creating the virtual environment $(VENV) with $(PYTHON)"
	@$(PYTHON) -m venv $(VENV)

# The first install takes a minute or two and used to print nothing (pip --quiet): a line per
# step and pip's own progress; once a stamp is newer than pyproject.toml nothing runs here.
$(STAMP): $(BIN)/python pyproject.toml
	@echo "make: upgrading pip in $(VENV)"
	@$(BIN)/python -m pip install --quiet --upgrade pip
	@echo "make: installing Pigeonhole and its dependencies with the test tools into $(VENV) (a minute or two on a first run)"
	@$(BIN)/python -m pip install --progress-bar on -e '.[dev]'
	@touch $(STAMP) $(RUN_STAMP)
	@echo "make: $(VENV) is ready"

install: $(STAMP)

# make run installs the project's own dependencies only: the test tools (moto, Playwright,
# schemathesis, hypothesis, …) were half of a new user's first wait. A .venv that has the dev
# extras already (make test, make install) has everything make run needs.
$(RUN_STAMP): $(BIN)/python pyproject.toml
	@if [ $(STAMP) -nt pyproject.toml ]; then true; else \
		echo "make: upgrading pip in $(VENV)" && \
		$(BIN)/python -m pip install --quiet --upgrade pip && \
		echo "make: installing Pigeonhole and its dependencies into $(VENV) (about a minute on a first run)" && \
		$(BIN)/python -m pip install --progress-bar on -e . && \
		echo "make: $(VENV) is ready"; fi
	@touch $(RUN_STAMP)

# One Python process migrates, bootstraps the demo workspace and serves (serve --migrate
# --before): three processes started Django three times, most of make run's wait
# (docs/benchmark-methods.md).
run: $(RUN_STAMP)
	@echo "make run: migrating the database (embedded: var/pigeonhole.sqlite3), the demo workspace"
	@echo "sign in    demo@pigeonhole.test / pigeonhole-demo  (the dashboard and /admin/)"
	@$(BIN)/python manage.py serve --port $(PORT) --smtp-port $(SMTP_PORT) --migrate \
		--before 'bootstrap --workspace Demo --owner demo@pigeonhole.test --password pigeonhole-demo --superuser --key-file $(DEMO_KEY_FILE)'

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

# The dashboard's browser tests drive Debian's Chromium through Playwright (never `playwright
# install`): installed here when missing, so `make test` fails only if apt cannot provide it.
browser:
	@command -v chromium >/dev/null || (echo "browser: installing Debian's chromium for the dashboard tests" && \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) || \
		(echo "browser: Chromium is missing and could not be installed; run 'apt-get install chromium' as root" >&2; exit 1)

# The two passes share nothing (PostgreSQL + Redis against a SQLite file, every live process on
# a port of its own), so they run side by side on the two cores; each pass's output is printed
# whole when it ends (--output-sync), and make fails if either fails.
test: install browser
	DATABASE_URL=$${DATABASE_URL:-$$DATABASE_URL_TEST} REDIS_URL=$${REDIS_URL:-$$REDIS_URL_TEST} \
		$(BIN)/python -m tests.preflight
	$(BIN)/ruff check .
	$(BIN)/lint-imports  # the layers of pyproject.toml's [tool.importlinter] (docs/architecture.md)
	DATABASE_URL=$${DATABASE_URL:-$$DATABASE_URL_TEST} REDIS_URL=$${REDIS_URL:-$$REDIS_URL_TEST} \
		DB_POOL_MAX=0 $(BIN)/python manage.py makemigrations --check --dry-run -v1
	$(MAKE) --no-print-directory --jobs=2 --output-sync=target test-postgres test-embedded \
		EMBEDDED_PYTEST_ARGS="-m 'not browser'"

# The fast tier, run after every edit: every test that needs no live process, no second thread's
# view of committed data and no browser (the `live` marker, set by tests/conftest.py), against
# PostgreSQL and Redis, with the generated hostile-mail matrix at 1,000 messages (make test runs
# 10,000) and the property tests at a fifth of their examples (tests/sizes.py), on both cores (pytest-xdist: a test database per worker; the matrices' figures are
# printed by make test, not here). --reuse-db keeps each worker's test database between runs
# (Django migrates it forward when a migration was added; `make test` always starts afresh).
test-fast: install
	DATABASE_URL=$${DATABASE_URL:-$$DATABASE_URL_TEST} REDIS_URL=$${REDIS_URL:-$$REDIS_URL_TEST} \
		$(BIN)/python -m tests.preflight
	$(BIN)/lint-imports
	DATABASE_URL=$${DATABASE_URL:-$$DATABASE_URL_TEST} REDIS_URL=$${REDIS_URL:-$$REDIS_URL_TEST} \
		CONN_MAX_AGE=0 HOSTILE_MAIL_MESSAGES=1000 TEST_TIER=fast $(BIN)/python -m pytest -q \
		-p no:cacheprovider -m "not live" -n 2 --dist worksteal --reuse-db

# Each pass runs on TEST_WORKERS pytest-xdist workers (make test: two passes of two workers on
# the two cores; a live test spends much of its time waiting on the processes it started). A
# worker has a test database and a Redis database of its own (tests/workers.py), and every live
# process it starts inherits them; --dist worksteal lets an idle worker take tests queued behind
# a long one (the schema fuzzer, the kill -9 scenario).
TEST_WORKERS ?= 2
XDIST := -n $(TEST_WORKERS) --dist worksteal

# The whole suite against PostgreSQL and Redis (the first pass of make test). Both passes print
# their 15 slowest tests: where the time of make test goes.
test-postgres: install
	DATABASE_URL=$${DATABASE_URL:-$$DATABASE_URL_TEST} REDIS_URL=$${REDIS_URL:-$$REDIS_URL_TEST} \
		CONN_MAX_AGE=0 $(BIN)/python -m pytest -q -p no:cacheprovider --durations=15 $(XDIST)

# The suite again in embedded mode (what make run uses): SQLite under var/embedded-test, no Redis,
# the in-memory channel layer, jobs in-process. The tests marked topology_production (Celery
# workers, the Redis broker, several web processes) are left out, and the two sized matrices run
# smaller (their full size runs against PostgreSQL just before): docs/testing.md.
# make test runs it without the browser tests (they pass here too, but cost four minutes):
# make test-embedded runs everything.
EMBEDDED_TEST_DIR := $(CURDIR)/var/embedded-test
EMBEDDED_PYTEST_ARGS ?=
test-embedded: install
	rm -rf $(EMBEDDED_TEST_DIR) && mkdir -p $(EMBEDDED_TEST_DIR)
	env -u REDIS_URL DATABASE_URL=sqlite:///$(EMBEDDED_TEST_DIR)/pigeonhole.sqlite3 \
		$(BIN)/python -m tests.preflight
	env -u REDIS_URL DATABASE_URL=sqlite:///$(EMBEDDED_TEST_DIR)/pigeonhole.sqlite3 \
		FUZZ_EXAMPLES=25 SECURITY_EVENTS=200 CONN_MAX_AGE=0 $(BIN)/python -m pytest -q -p no:cacheprovider \
		--durations=15 $(XDIST) $(EMBEDDED_PYTEST_ARGS)

# Each benchmark reports its figures against its targets and exits 0 whatever they are (so that
# one miss leaves nothing unmeasured); the summary, last, exits 1 when any target is missed and
# says which areas only report (tests/benchmarks/summary.py).
bench: install
	DATABASE_URL=$${DATABASE_URL:-$$DATABASE_URL_TEST} REDIS_URL=$${REDIS_URL:-$$REDIS_URL_TEST} \
		$(BIN)/python -m tests.benchmarks
	DATABASE_URL=$${DATABASE_URL:-$$DATABASE_URL_TEST} REDIS_URL=$${REDIS_URL:-$$REDIS_URL_TEST} \
		$(BIN)/python -m tests.benchmarks.webhooks
	DATABASE_URL=$${DATABASE_URL:-$$DATABASE_URL_TEST} REDIS_URL=$${REDIS_URL:-$$REDIS_URL_TEST} \
		$(BIN)/python -m tests.benchmarks.ingest --maildev
	DATABASE_URL=$${DATABASE_URL:-$$DATABASE_URL_TEST} REDIS_URL=$${REDIS_URL:-$$REDIS_URL_TEST} \
		$(BIN)/python -m tests.benchmarks.rest --report-only
	DATABASE_URL=$${DATABASE_URL:-$$DATABASE_URL_TEST} REDIS_URL=$${REDIS_URL:-$$REDIS_URL_TEST} \
		$(BIN)/python -m tests.benchmarks.scale
	DATABASE_URL=$${DATABASE_URL:-$$DATABASE_URL_TEST} REDIS_URL=$${REDIS_URL:-$$REDIS_URL_TEST} \
		$(BIN)/python -m tests.benchmarks.scaleout
	DATABASE_URL=$${DATABASE_URL:-$$DATABASE_URL_TEST} REDIS_URL=$${REDIS_URL:-$$REDIS_URL_TEST} \
		$(BIN)/python -m tests.benchmarks.lifecycle
	DATABASE_URL=$${DATABASE_URL:-$$DATABASE_URL_TEST} REDIS_URL=$${REDIS_URL:-$$REDIS_URL_TEST} \
		$(BIN)/python -m tests.benchmarks.startup --report-only
	$(BIN)/python -m tests.benchmarks.summary

chaos: install
	DATABASE_URL=$${DATABASE_URL:-$$DATABASE_URL_TEST} REDIS_URL=$${REDIS_URL:-$$REDIS_URL_TEST} \
		$(BIN)/python -m tests.chaos

# The security matrices (tests/security, issue 11) at their large sizes; make test runs the small.
# Signatures and keys: 100,000 signatures, 10,000,000 random key-shaped strings. Hostile HTML: the
# 252 hand-made vectors each in a message of its own plus 2,000 mutated ones, in Chromium (about
# 13 minutes here). Tenancy: 10,000 events in one workspace (SMTP mail, refusals, API changes),
# none of them at the other workspace's wait, stream or webhook. The schema fuzzer: 1,000 examples
# per operation against a live daphne (make test runs 100). Hostile mail: 100,000 generated and
# mutated messages through the receive pipeline, the hostile corpus three times, the SMTP limits.
fuzz: install browser
	DATABASE_URL=$${DATABASE_URL:-$$DATABASE_URL_TEST} REDIS_URL=$${REDIS_URL:-$$REDIS_URL_TEST} \
		SIGNATURES_KEYS_SIZE=large CONN_MAX_AGE=0 $(BIN)/python -m pytest -q -p no:cacheprovider -s \
		tests/security/test_signatures_keys.py -k "signatures_verify or on_the_wire or false_positives"
	DATABASE_URL=$${DATABASE_URL:-$$DATABASE_URL_TEST} REDIS_URL=$${REDIS_URL:-$$REDIS_URL_TEST} \
		CONN_MAX_AGE=0 HOSTILE_HTML_SIZE=large $(BIN)/python -m pytest -q -p no:cacheprovider -s \
		tests/security/browser/test_hostile_html.py
	DATABASE_URL=$${DATABASE_URL:-$$DATABASE_URL_TEST} REDIS_URL=$${REDIS_URL:-$$REDIS_URL_TEST} \
		SECURITY_EVENTS=10000 $(BIN)/python -m pytest -q -p no:cacheprovider \
		tests/security/test_tenancy.py -k foreign_events
	DATABASE_URL=$${DATABASE_URL:-$$DATABASE_URL_TEST} REDIS_URL=$${REDIS_URL:-$$REDIS_URL_TEST} \
		CONN_MAX_AGE=0 FUZZ_EXAMPLES=1000 $(BIN)/python -m pytest -q -s -p no:cacheprovider \
		tests/security/test_schema_fuzz.py
	DATABASE_URL=$${DATABASE_URL:-$$DATABASE_URL_TEST} REDIS_URL=$${REDIS_URL:-$$REDIS_URL_TEST} \
		CONN_MAX_AGE=0 HOSTILE_MAIL_SIZE=large $(BIN)/python -m pytest -q -p no:cacheprovider \
		tests/security/test_hostile_mail.py tests/security/test_smtp_limits.py

clean:
	rm -rf $(VENV) var .pytest_cache .ruff_cache
